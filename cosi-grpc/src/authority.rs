//! Any `:authority` on a Unix socket.
//!
//! A gRPC client built on gRPC's C core (Python's `grpcio`, C++, Ruby, PHP)
//! sends, by default, the socket's path as the `:authority` of its requests
//! over a Unix socket, percent-encoded (`tmp%2Fdir%2Fs.sock`), which is no
//! valid authority; the HTTP/2 server resets such a stream with
//! `PROTOCOL_ERROR` before any handler runs, and offers no way to relax it.
//! On a Unix socket the authority carries no meaning, so [`AnyAuthority`]
//! stands between the socket and the HTTP/2 server and rewrites what the
//! client sends: every header block is decoded (HPACK, with the client's
//! dynamic table) and encoded again as plain literals that never touch the
//! server's dynamic table, with an `:authority` that does not parse replaced
//! by `localhost`. Every other frame passes through byte for byte.
//!
//! Bounded as the server is: a header block of more than
//! [`MAX_HEADER_BLOCK`] bytes, or that decodes to more than the server's
//! `max_header_list_size`, or that does not decode, closes the connection
//! (the HTTP/2 server would have refused it too).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf as _, BufMut as _, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client's connection preface, which precedes its first frame.
const PREFACE_LEN: usize = 24;
/// A frame's header: length (24 bits), type, flags, stream.
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame every HTTP/2 peer accepts (the protocol's initial
/// `SETTINGS_MAX_FRAME_SIZE`): the frames written here are never larger.
const MAX_FRAME: usize = 16_384;
/// The most bytes of one header block (its HEADERS and CONTINUATION
/// frames) gathered before it is decoded.
pub(crate) const MAX_HEADER_BLOCK: usize = 256 << 10;
/// The HPACK dynamic table the client may use: the protocol's default,
/// which the HTTP/2 server does not change.
const HEADER_TABLE_SIZE: usize = 4_096;

/// A connection whose requests may carry any `:authority` (see the module's
/// documentation).
pub(crate) struct AnyAuthority<IO> {
    io: IO,
    /// Bytes read from the client and not yet rewritten.
    input: BytesMut,
    /// Where the client's bytes are read into.
    scratch: Box<[u8]>,
    /// Bytes rewritten, for the server to read.
    output: BytesMut,
    /// What is left of the client's preface.
    preface: usize,
    /// What is left of a frame passing through unchanged.
    forward: usize,
    /// The header block being gathered.
    block: Option<Block>,
    decoder: loona_hpack::Decoder<'static>,
    max_header_list_size: usize,
    /// The client closed its side; what is left is passed on, then the end.
    ended: bool,
}

/// A header block being gathered from a HEADERS frame and its CONTINUATIONs.
struct Block {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: BytesMut,
}

impl<IO> AnyAuthority<IO> {
    /// Rewrites what the client sends on `io`; header lists may decode to at
    /// most `max_header_list_size` bytes (as HTTP/2 counts them).
    pub(crate) fn new(io: IO, max_header_list_size: usize) -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        AnyAuthority {
            io,
            input: BytesMut::new(),
            scratch: vec![0; 16 << 10].into_boxed_slice(),
            output: BytesMut::new(),
            preface: PREFACE_LEN,
            forward: 0,
            block: None,
            decoder,
            max_header_list_size,
            ended: false,
        }
    }

    /// Rewrites as much of the input as is whole into the output.
    fn rewrite(&mut self) -> std::io::Result<()> {
        loop {
            if self.preface > 0 || self.forward > 0 {
                let left = if self.preface > 0 { &mut self.preface } else { &mut self.forward };
                let n = (*left).min(self.input.len());
                if n == 0 {
                    return Ok(());
                }
                self.output.extend_from_slice(&self.input.split_to(n));
                *left -= n;
                continue;
            }
            let Some(header) = self.input.get(..FRAME_HEADER_LEN) else { return Ok(()) };
            let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let (kind, flags) = (header[3], header[4]);
            let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
            match kind {
                HEADERS | CONTINUATION => {
                    if len > MAX_HEADER_BLOCK {
                        return Err(invalid(format!("a header frame of {len} bytes")));
                    }
                    if self.input.len() < FRAME_HEADER_LEN + len {
                        return Ok(());
                    }
                    let mut frame = self.input.split_to(FRAME_HEADER_LEN + len);
                    frame.advance(FRAME_HEADER_LEN);
                    self.header_frame(kind, flags, stream, frame)?;
                }
                _ if self.block.is_some() => {
                    return Err(invalid("a frame other than CONTINUATION inside a header block".to_owned()));
                }
                _ => {
                    self.output.extend_from_slice(&self.input.split_to(FRAME_HEADER_LEN));
                    self.forward = len;
                }
            }
        }
    }

    /// Gathers a HEADERS or CONTINUATION frame's part of a header block, and
    /// rewrites the block once it is whole.
    fn header_frame(&mut self, kind: u8, flags: u8, stream: u32, mut payload: BytesMut) -> std::io::Result<()> {
        match (kind, &mut self.block) {
            (HEADERS, None) => {
                let padding = match flags & PADDED {
                    0 => 0,
                    _ => match payload.is_empty() {
                        true => return Err(invalid("a padded HEADERS frame without its padding length".to_owned())),
                        false => usize::from(payload.split_to(1)[0]),
                    },
                };
                let priority = match flags & PRIORITY {
                    0 => None,
                    _ => match payload.get(..5) {
                        Some(priority) => {
                            let priority = <[u8; 5]>::try_from(priority).ok();
                            payload.advance(5);
                            priority
                        }
                        None => return Err(invalid("a HEADERS frame too short for its priority".to_owned())),
                    },
                };
                if padding > payload.len() {
                    return Err(invalid("a HEADERS frame's padding is longer than the frame".to_owned()));
                }
                payload.truncate(payload.len() - padding);
                self.block = Some(Block { stream, end_stream: flags & END_STREAM != 0, priority, fragment: payload });
            }
            (CONTINUATION, Some(block)) if block.stream == stream => {
                if block.fragment.len() + payload.len() > MAX_HEADER_BLOCK {
                    return Err(invalid(format!("a header block of more than {MAX_HEADER_BLOCK} bytes")));
                }
                block.fragment.extend_from_slice(&payload);
            }
            _ => return Err(invalid("a header frame out of sequence".to_owned())),
        }
        if flags & END_HEADERS != 0
            && let Some(block) = self.block.take()
        {
            self.rewrite_block(block)?;
        }
        Ok(())
    }

    /// Decodes a whole header block and writes it again: plain literals,
    /// with an `:authority` that does not parse replaced.
    fn rewrite_block(&mut self, block: Block) -> std::io::Result<()> {
        let mut fields = Vec::new();
        let mut size = 0_usize;
        let limit = self.max_header_list_size;
        self.decoder
            .decode_with_cb(&block.fragment, |name, value| {
                // As HTTP/2 counts a header list (RFC 9113, 6.5.2).
                size = size.saturating_add(name.len() + value.len() + 32);
                if size <= limit {
                    fields.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|err| invalid(format!("a header block that does not decode ({err:?})")))?;
        if size > limit {
            return Err(invalid(format!("a header list of {size} bytes, over the limit of {limit}")));
        }
        let mut encoded = BytesMut::new();
        for (name, value) in &fields {
            let value =
                match name.as_slice() == b":authority" && http::uri::Authority::try_from(value.as_slice()).is_err() {
                    true => b"localhost".as_slice(),
                    false => value.as_slice(),
                };
            // A literal field without indexing, with a literal name.
            encoded.put_u8(0);
            put_string(&mut encoded, name);
            put_string(&mut encoded, value);
        }
        let mut first = true;
        let mut rest = encoded.freeze();
        loop {
            let room = MAX_FRAME - if first && block.priority.is_some() { 5 } else { 0 };
            let chunk = rest.split_to(rest.len().min(room));
            let mut flags = if rest.is_empty() { END_HEADERS } else { 0 };
            let kind = match first {
                true => {
                    flags |= if block.end_stream { END_STREAM } else { 0 };
                    flags |= if block.priority.is_some() { PRIORITY } else { 0 };
                    HEADERS
                }
                false => CONTINUATION,
            };
            let priority = block.priority.filter(|_| first);
            let len = chunk.len() + priority.map_or(0, |priority| priority.len());
            // Below MAX_FRAME: three bytes hold it.
            self.output.put_uint(len as u64, 3);
            self.output.put_u8(kind);
            self.output.put_u8(flags);
            self.output.put_u32(block.stream);
            if let Some(priority) = priority {
                self.output.extend_from_slice(&priority);
            }
            self.output.extend_from_slice(&chunk);
            first = false;
            if rest.is_empty() {
                return Ok(());
            }
        }
    }
}

/// An HPACK string literal, not Huffman-coded.
fn put_string(out: &mut BytesMut, bytes: &[u8]) {
    put_integer(out, 0, 7, bytes.len());
    out.extend_from_slice(bytes);
}

/// An HPACK integer with a prefix of `bits` bits, after `high` (RFC 7541, 5.1).
fn put_integer(out: &mut BytesMut, high: u8, bits: u32, value: usize) {
    let max = (1_usize << bits) - 1;
    if value < max {
        // Below the prefix's maximum: it fits in a byte.
        out.put_u8(high | value as u8);
        return;
    }
    out.put_u8(high | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.put_u8((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.put_u8(rest as u8);
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("closed a Unix socket connection that sent {what}"))
}

impl<IO: AsyncRead + Unpin> AsyncRead for AnyAuthority<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output.split_to(n));
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                // What is left is no whole frame: the server sees it cut short.
                let rest = this.input.split();
                if rest.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.output = rest;
                continue;
            }
            if let Err(err) = this.rewrite() {
                tracing::debug!(error = %err, "closed a Unix socket connection");
                return Poll::Ready(Err(err));
            }
            if !this.output.is_empty() {
                continue;
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            match Pin::new(&mut this.io).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Ready(Ok(())) if read.filled().is_empty() => this.ended = true,
                Poll::Ready(Ok(())) => this.input.extend_from_slice(read.filled()),
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for AnyAuthority<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// What the server reads when a client sends `sent` and closes: the whole of
/// the rewritten bytes, or the error that closed the connection.
#[cfg(feature = "fuzzing")]
pub(crate) fn rewrite_all(sent: &[u8], max_header_list_size: usize) -> std::io::Result<Vec<u8>> {
    let mut connection = AnyAuthority::new(sent, max_header_list_size);
    let mut out = Vec::new();
    let mut chunk = [0; 4096];
    let mut cx = Context::from_waker(std::task::Waker::noop());
    loop {
        let mut buf = ReadBuf::new(&mut chunk);
        // A byte slice is always ready: so is what reads it.
        match Pin::new(&mut connection).poll_read(&mut cx, &mut buf) {
            Poll::Ready(Ok(())) if buf.filled().is_empty() => return Ok(out),
            Poll::Ready(Ok(())) => out.extend_from_slice(buf.filled()),
            Poll::Ready(Err(error)) => return Err(error),
            Poll::Pending => return Err(std::io::Error::other("a read of bytes in memory waited")),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).expect("small").to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, flags];
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }

    /// What the server reads when the client sends `sent` and closes.
    async fn rewritten(sent: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        client.write_all(&sent).await.expect("send");
        drop(client);
        let mut out = Vec::new();
        AnyAuthority::new(server, 64 << 10).read_to_end(&mut out).await.map(|_| out)
    }

    /// The frames of `bytes` after the preface: (type, flags, stream, payload).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        bytes = &bytes[PREFACE_LEN..];
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            frames.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
            bytes = &bytes[9 + len..];
        }
        frames
    }

    #[tokio::test]
    async fn blocks_in_pieces_padded_or_prioritised_come_out_whole_and_plain() {
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        // :method POST; :authority, indexed, the C core's form; and a
        // 20 KB header, which needs a CONTINUATION once encoded again.
        let mut block = BytesMut::from(&[0x83, 0x41][..]);
        put_string(&mut block, b"a%2Fb.sock");
        block.put_u8(0);
        put_string(&mut block, b"x");
        put_string(&mut block, &[b'y'; 20_000]);
        let (head, tail) = block.split_at(6);
        let mut first = vec![3]; // the padding's length
        first.extend_from_slice(&[0, 0, 0, 0, 16]); // the priority
        first.extend_from_slice(head);
        first.extend_from_slice(&[0, 0, 0]);
        let mut sent = preface.clone();
        sent.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 1, &first));
        sent.extend(frame(CONTINUATION, END_HEADERS, 1, tail));
        sent.extend(frame(0x0, 0x1, 1, b"data"));

        let out = rewritten(sent).await.expect("rewritten");
        assert_eq!(&out[..PREFACE_LEN], preface.as_slice());
        let frames = frames(&out);
        let (kinds, flags): (Vec<u8>, Vec<u8>) = frames.iter().map(|frame| (frame.0, frame.1)).unzip();
        assert_eq!(kinds, [HEADERS, CONTINUATION, 0x0]);
        assert_eq!(flags, [PRIORITY | END_STREAM, END_HEADERS, 0x1]);
        assert_eq!(&frames[0].3[..5], &[0, 0, 0, 0, 16], "the priority is kept");
        assert_eq!(frames[2].3, b"data", "other frames pass unchanged");
        let mut whole = frames[0].3[5..].to_vec();
        whole.extend_from_slice(&frames[1].3);
        let mut fields = Vec::new();
        loona_hpack::Decoder::new()
            .decode_with_cb(&whole, |name, value| fields.push((name.into_owned(), value.len())))
            .expect("decodes");
        assert_eq!(fields, [(b":method".to_vec(), 4), (b":authority".to_vec(), 9), (b"x".to_vec(), 20_000)]);
        assert!(whole.windows(9).any(|window| window == b"localhost"), "the authority is replaced");
    }

    #[tokio::test]
    async fn bad_input_is_an_error_or_passes_through_and_never_a_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..2_000 {
            let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 64) as usize;
            let kind = [HEADERS, CONTINUATION, 0x0][(seed >> 8) as usize % 3];
            let payload: Vec<u8> = (0..len).map(|i| (seed >> (i % 56)) as u8).collect();
            sent.extend(frame(kind, (seed >> 16) as u8, 1, &payload));
            let _ = rewritten(sent).await;
        }
        let oversized = [&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..], &[0x10, 0, 0, HEADERS, 0, 0, 0, 0, 1]].concat();
        assert!(rewritten(oversized).await.is_err(), "a header frame over the bound");
    }
}
