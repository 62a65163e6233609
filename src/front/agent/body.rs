//! A reply body for the HTTP front: bytes in memory, or a file streamed in chunks read on the
//! runtime's blocking pool one at a time (a slow client holds no thread while it does not read).

use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::task::JoinHandle;

/// Bytes read from a file per chunk.
pub(crate) const CHUNK: usize = 256 * 1024;

type Chunk = (std::fs::File, std::io::Result<Vec<u8>>);

/// See the module's documentation.
pub(crate) enum ReplyBody {
    /// Bytes in memory (taken when sent).
    Bytes(Option<Bytes>),
    /// A file: what is left to send of the length it had when opened.
    File {
        /// The file, while no chunk is being read.
        file: Option<std::fs::File>,
        /// The chunk being read.
        reading: Option<JoinHandle<Chunk>>,
        /// Bytes left to send.
        left: u64,
    },
}

impl ReplyBody {
    /// A body of `b`.
    pub(crate) fn bytes(b: Vec<u8>) -> Self {
        Self::Bytes(Some(Bytes::from(b)))
    }

    /// A file sent as it is: the length it has now (a log being written grows; the bytes
    /// after this length are not sent, so `Content-Length` stays true).
    pub(crate) fn file(file: std::fs::File) -> Self {
        let left = file.metadata().map_or(0, |m| m.len());
        Self::File {
            file: Some(file),
            reading: None,
            left,
        }
    }
}

fn read_chunk(mut file: std::fs::File, want: usize) -> Chunk {
    let mut buf = vec![0u8; want];
    let mut got = 0;
    while got < want {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (file, Err(e)),
        }
    }
    buf.truncate(got);
    (file, Ok(buf))
}

fn poll_file(
    file: &mut Option<std::fs::File>,
    reading: &mut Option<JoinHandle<Chunk>>,
    left: &mut u64,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
    if *left == 0 {
        return Poll::Ready(None);
    }
    if reading.is_none() {
        let Some(f) = file.take() else {
            return Poll::Ready(None);
        };
        let want = (*left).min(CHUNK as u64) as usize;
        *reading = Some(tokio::task::spawn_blocking(move || read_chunk(f, want)));
    }
    let Some(task) = reading.as_mut() else {
        return Poll::Ready(None);
    };
    let done = match Pin::new(task).poll(cx) {
        Poll::Pending => return Poll::Pending,
        Poll::Ready(r) => r,
    };
    *reading = None;
    match done {
        Ok((f, Ok(buf))) if !buf.is_empty() => {
            *file = Some(f);
            *left -= buf.len() as u64;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
        }
        Ok((_, Ok(_))) => Poll::Ready(Some(Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the session file became shorter while it was sent",
        )))),
        Ok((_, Err(e))) => Poll::Ready(Some(Err(e))),
        Err(e) => Poll::Ready(Some(Err(std::io::Error::other(e.to_string())))),
    }
}

impl http_body::Body for ReplyBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Self::Bytes(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Self::File {
                file,
                reading,
                left,
            } => poll_file(file, reading, left, cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Bytes(b) => b.as_ref().is_none_or(Bytes::is_empty),
            Self::File { left, .. } => *left == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Bytes(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Self::File { left, .. } => SizeHint::with_exact(*left),
        }
    }
}

impl Drop for ReplyBody {
    fn drop(&mut self) {
        // A client gone mid-download: the chunk being read finishes on its own and is dropped.
        if let Self::File {
            reading: Some(t), ..
        } = self
        {
            t.abort();
        }
    }
}
