//! libFuzzer entry point of `cosi_fuzz::queries` (see that function for what it reads).
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cosi_fuzz::queries(data));
