//! The target `unix_headers`: what a client sends on the gRPC server's Unix
//! socket, where the server rewrites every header block before the HTTP/2
//! server reads it (`cosi-grpc/src/authority.rs`: any `:authority` is
//! served there, so the C core's form of one is too).

/// The HTTP/2 preface every client sends first; the harness sends it too, so
/// that the fuzzer's bytes are frames.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// The client's bytes after its preface, rewritten as the server would read
/// them: never a panic, and what comes out is what the HTTP/2 server takes:
/// every whole header block decodes alone (plain literals, no dynamic
/// table of the client's) and names an `:authority` that parses, if any.
pub fn unix_headers(data: &[u8]) {
    let sent = [PREFACE, data].concat();
    let Ok(out) = cosi_grpc::fuzzing::rewrite_unix_client(&sent) else { return };
    assert!(out.starts_with(PREFACE), "the preface did not pass through");
    let mut rest = &out[PREFACE.len()..];
    let mut block: Option<Vec<u8>> = None;
    while rest.len() >= 9 {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let Some(payload) = rest.get(9..9 + len) else { break };
        rest = &rest[9 + len..];
        let fragment = match kind {
            HEADERS => {
                assert!(block.is_none(), "a header block began inside another");
                assert_eq!(flags & PADDED, 0, "a rewritten header block is never padded");
                let skip = if flags & PRIORITY != 0 { 5 } else { 0 };
                payload.get(skip..).expect("a rewritten HEADERS frame holds its priority")
            }
            CONTINUATION => match &block {
                Some(_) => payload,
                // A stray CONTINUATION passes through, for the server to refuse.
                None => continue,
            },
            _ => {
                assert!(block.is_none(), "a frame came between a header block's frames");
                continue;
            }
        };
        let gathered = block.get_or_insert_with(Vec::new);
        gathered.extend_from_slice(fragment);
        if flags & END_HEADERS != 0 {
            check_block(&block.take().unwrap_or_default());
        }
    }
}

/// A rewritten header block: decodes with a fresh decoder, and any
/// `:authority` it names is one.
fn check_block(block: &[u8]) {
    let mut authorities = Vec::new();
    let decoded = loona_hpack::Decoder::new().decode_with_cb(block, |name, value| {
        if &*name == b":authority" {
            authorities.push(value.into_owned());
        }
    });
    assert!(decoded.is_ok(), "a rewritten header block does not decode alone: {decoded:?}");
    for authority in authorities {
        let parsed = http::uri::Authority::try_from(authority.as_slice());
        assert!(parsed.is_ok(), "a rewritten :authority does not parse: {:?}", String::from_utf8_lossy(&authority));
    }
}
