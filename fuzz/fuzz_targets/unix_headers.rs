//! libFuzzer entry point of `cosi_fuzz::unix_headers` (see that function for what it reads).
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cosi_fuzz::unix_headers(data));
