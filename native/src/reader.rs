//! `FrameReader`: Kafka's size-prefixed response frames received on a thread of their own.
//!
//! The thread owns a `dup` of the connection's socket and never touches Python: it waits in
//! poll(2) on the socket and a wake eventfd, receives each 4-byte size and then the frame straight
//! into a `Vec` of exactly that size (no intermediate buffer, no resize), queues it and signals a
//! notify eventfd the event loop watches. The loop's thread takes the queued frames as `bytes`
//! (one copy) or as `Frame` buffers that own the thread's `Vec` (no copy). The queue is not
//! bounded: a Kafka client bounds it by the requests it has in flight.
//! EOF, an OSError or a size outside `4..=max_frame_bytes` ends the thread; the reason is handed
//! out once, after every frame completed before it. `close()` (or dropping the reader) wakes the
//! thread, joins it (it never blocks anywhere but in poll, so this is prompt) and closes the fds.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::errors::{guarded, panic_message};

/// Why the reading thread stopped.
#[derive(Debug)]
enum End {
    /// The peer announced a frame size outside `4..=max_frame_bytes`.
    Size(i32),
    /// EOF after this many bytes of the current frame, its size prefix included (0: between frames).
    Eof(usize),
    /// poll(2) or recv(2) failed.
    Os(io::Error),
    /// A panic in the thread (a bug).
    Panic(String),
    /// `close()` asked it to stop: nothing to report.
    Closed,
}

impl End {
    /// `(kind, number, message)` for Python: the size, the bytes received, or the errno.
    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (kind, number, message) = match self {
            End::Size(size) => ("size", i64::from(*size), String::new()),
            End::Eof(received) => (
                "eof",
                i64::try_from(*received).unwrap_or(i64::MAX),
                String::new(),
            ),
            End::Os(err) => (
                "os",
                i64::from(err.raw_os_error().unwrap_or(0)),
                err.to_string(),
            ),
            End::Panic(message) => ("native", 0, message.clone()),
            End::Closed => ("closed", 0, String::new()),
        };
        PyTuple::new(
            py,
            [
                kind.into_pyobject(py)?.into_any(),
                number.into_pyobject(py)?.into_any(),
                message.into_pyobject(py)?.into_any(),
            ],
        )
    }
}

/// What the thread has received and not yet handed out.
#[derive(Default)]
struct Inbox {
    frames: VecDeque<Vec<u8>>,
    end: Option<End>,
}

/// The state the thread and the Python object share.
struct Shared {
    inbox: Mutex<Inbox>,
    /// Signalled (eventfd) when a frame or the end is queued: the event loop's `add_reader` fd.
    notify: OwnedFd,
    /// Signalled by `close()`; the thread polls it beside the socket.
    wake: OwnedFd,
    closing: AtomicBool,
}

impl Shared {
    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // A panic while holding the lock left only whole frames behind: keep using them.
        self.inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, frame: Vec<u8>) {
        let mut inbox = self.inbox();
        // The loop resets the eventfd under this lock before draining: a frame pushed onto a
        // non-empty queue is drained with the others, so one signal per empty->non-empty suffices.
        let was_empty = inbox.frames.is_empty();
        inbox.frames.push_back(frame);
        drop(inbox);
        if was_empty {
            signal(self.notify.as_raw_fd());
        }
    }

    fn finish(&self, end: End) {
        self.inbox().end = Some(end);
        signal(self.notify.as_raw_fd());
    }

    /// Every queued frame, and the end once (None while the thread runs or after it was handed out).
    fn take(&self) -> (VecDeque<Vec<u8>>, Option<End>) {
        let mut inbox = self.inbox();
        reset(self.notify.as_raw_fd());
        let end = inbox.end.take().filter(|end| !matches!(end, End::Closed));
        (std::mem::take(&mut inbox.frames), end)
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd(2) has no memory arguments; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64. A full counter (EAGAIN) is already signalled.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

fn reset(fd: RawFd) {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64. EAGAIN: it was not signalled.
    unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
}

/// The thread's side: one socket, read frame by frame until EOF, an error, a bad size or close.
struct Receiver<'a> {
    shared: &'a Shared,
    socket: &'a OwnedFd,
    max_frame_bytes: usize,
}

impl Receiver<'_> {
    fn run(&self) -> End {
        loop {
            let mut header = [0u8; 4];
            if let Err(end) = self.fill(header.as_mut_ptr(), 4, 0) {
                return end;
            }
            let size = i32::from_be_bytes(header);
            let len = match usize::try_from(size) {
                Ok(len) if (4..=self.max_frame_bytes).contains(&len) => len,
                _ => return End::Size(size),
            };
            let mut frame: Vec<u8> = Vec::new();
            if let Err(err) = frame.try_reserve_exact(len) {
                return End::Os(io::Error::new(io::ErrorKind::OutOfMemory, err.to_string()));
            }
            if let Err(end) = self.fill(frame.as_mut_ptr(), len, 4) {
                return end;
            }
            // SAFETY: fill() wrote all `len` bytes of the reserved capacity.
            unsafe { frame.set_len(len) };
            self.shared.push(frame);
        }
    }

    /// Receive exactly `len` bytes into `buf`; `before` bytes of this frame were received already.
    fn fill(&self, buf: *mut u8, len: usize, before: usize) -> Result<(), End> {
        let mut got = 0;
        while got < len {
            if self.shared.closing.load(Ordering::Acquire) {
                return Err(End::Closed);
            }
            // SAFETY: buf has `len` writable bytes (a live array or reserved Vec capacity);
            // MSG_DONTWAIT because the fd shares its (non-blocking) file description with asyncio.
            let n = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    buf.add(got).cast(),
                    len - got,
                    libc::MSG_DONTWAIT,
                )
            };
            match n {
                0 => return Err(End::Eof(before + got)),
                n if n > 0 => got += n as usize,
                _ => {
                    let err = io::Error::last_os_error();
                    match err.kind() {
                        io::ErrorKind::WouldBlock => self.wait()?,
                        io::ErrorKind::Interrupted => {}
                        _ => return Err(End::Os(err)),
                    }
                }
            }
        }
        Ok(())
    }

    /// Wait until the socket is readable (or broken) or `close()` wakes us.
    fn wait(&self) -> Result<(), End> {
        let mut fds = [
            libc::pollfd {
                fd: self.socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.shared.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: fds is a live array of two pollfd.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n >= 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(End::Os(err));
            }
        }
        if fds[1].revents != 0 {
            return Err(End::Closed);
        }
        if fds[0].revents & libc::POLLNVAL != 0 {
            return Err(End::Os(io::Error::from_raw_os_error(libc::EBADF)));
        }
        Ok(()) // readable, or POLLHUP/POLLERR: the next recv says which
    }
}

/// The thread's body: a panic is recorded as the end, never unwinds further.
fn receive(shared: Arc<Shared>, socket: OwnedFd, max_frame_bytes: usize) {
    let receiver = Receiver {
        shared: &shared,
        socket: &socket,
        max_frame_bytes,
    };
    let end = catch_unwind(AssertUnwindSafe(|| receiver.run()))
        .unwrap_or_else(|payload| End::Panic(panic_message(payload.as_ref())));
    drop(socket); // our dup: closed as soon as the thread is done with it
    shared.finish(end);
}

/// A running thread: stopping it wakes, joins and (with the last `Arc`) closes the eventfds.
struct Running {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::Release);
        signal(self.shared.wake.as_raw_fd());
        if let Some(thread) = self.thread.take() {
            // The thread catches its own panics: join cannot fail but for a bug in the catch.
            let _ = thread.join();
        }
    }
}

fn start(fd: RawFd, max_frame_bytes: usize) -> io::Result<Running> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) only reads the fd number; a bad fd fails with EBADF.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: dup is a new fd owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(dup) };
    let shared = Arc::new(Shared {
        inbox: Mutex::new(Inbox::default()),
        notify: eventfd()?,
        wake: eventfd()?,
        closing: AtomicBool::new(false),
    });
    let for_thread = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("aiokafka-frames".to_owned())
        .spawn(move || receive(for_thread, socket, max_frame_bytes))?;
    Ok(Running {
        shared,
        thread: Some(thread),
    })
}

/// One received frame handed out without a copy: a read-only buffer over the thread's `Vec`
/// (`memoryview(frame)`), freed when the last view of it is released.
#[pyclass(module = "aiokafka_lite._native", frozen)]
pub struct Frame {
    data: Box<[u8]>,
}

#[pymethods]
impl Frame {
    /// # Safety
    /// Called by Python's buffer protocol with a valid `view`; the data is immutable and lives
    /// as long as `slf`, which the view holds a reference to.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let data = &slf.get().data;
        let len = ffi::Py_ssize_t::try_from(data.len())?;
        // readonly=1: a request for a writable buffer fails with BufferError.
        let ptr = data.as_ptr() as *mut c_void;
        if ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr, len, 1, flags) != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }
}

impl Frame {
    pub fn data(&self) -> &[u8] {
        &self.data
    }
}

/// Receives a socket's response frames on a thread of its own (see the module docs).
#[pyclass(module = "aiokafka_lite._native", frozen)]
pub struct FrameReader {
    notify_fd: RawFd,
    running: Mutex<Option<Running>>,
}

impl FrameReader {
    fn running(&self) -> MutexGuard<'_, Option<Running>> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl FrameReader {
    #[new]
    fn new(py: Python<'_>, fd: RawFd, max_frame_bytes: usize) -> PyResult<Self> {
        guarded(py, "FrameReader", || {
            if max_frame_bytes < 4 {
                return Err(PyValueError::new_err(format!(
                    "max_frame_bytes must be at least 4, not {max_frame_bytes}"
                )));
            }
            let running = start(fd, max_frame_bytes)?;
            let notify_fd = running.shared.notify.as_raw_fd();
            Ok(FrameReader {
                notify_fd,
                running: Mutex::new(Some(running)),
            })
        })
    }

    /// The eventfd that becomes readable when `take()` has something (for `loop.add_reader`).
    fn notify_fd(&self) -> RawFd {
        self.notify_fd
    }

    /// `(frames, end)`: every frame received since the last call, in order, as `bytes` (one copy)
    /// or with `copy=False` as `Frame` buffers (none); then the reason the thread ended as
    /// `(kind, number, message)`, once, or None.
    #[pyo3(signature = (copy = true))]
    fn take<'py>(&self, py: Python<'py>, copy: bool) -> PyResult<Bound<'py, PyTuple>> {
        guarded(py, "FrameReader.take", || {
            let (frames, end) = match self.running().as_ref() {
                Some(running) => running.shared.take(),
                None => (VecDeque::new(), None),
            };
            let list = PyList::empty(py);
            for frame in frames {
                if copy {
                    list.append(PyBytes::new(py, &frame))?;
                } else {
                    let data = frame.into_boxed_slice(); // exact capacity: no reallocation
                    list.append(Bound::new(py, Frame { data })?)?;
                }
            }
            let end = match end {
                Some(end) => end.to_python(py)?.into_any(),
                None => py.None().into_bound(py),
            };
            PyTuple::new(py, [list.into_any(), end])
        })
    }

    /// Stop the thread and close the fds; frames not yet taken are dropped. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        guarded(py, "FrameReader.close", || {
            let running = self.running().take();
            py.allow_threads(move || drop(running));
            Ok::<(), PyErr>(())
        })
    }

    /// True until `close()`.
    #[getter]
    fn open(&self) -> bool {
        self.running().is_some()
    }
}
