//! `FrameReader`: Kafka's size-prefixed response frames received on a small process-wide pool of
//! I/O threads.
//!
//! Every reader owns a non-blocking `dup` of its connection's socket, registered with the epoll
//! instance of one reactor: a thread that never touches Python, with its own epoll, wake eventfd
//! and command queue. 100 idle connections cost at most the pool's threads, not 100.
//! Why a pool and not one thread: a consumer receives its big fetch responses on two connections
//! per broker, and one thread receiving both was measured 15% slower (records/s, 10 KB records)
//! than a thread each; a pool puts them on different cores again.
//! How big: `min(available_parallelism, 4)` reactors. More threads than cores only take turns, and
//! a client's busy connections are few (the fetch lanes; metadata and the coordinator are mostly
//! idle), so a fifth thread would rarely have work of its own.
//! Which one: a new reader goes to the reactor serving the fewest readers right now (ties: the
//! lowest slot), so a consumer's bootstrap, coordinator and two fetch connections are spread over
//! the threads and its two fetch lanes are on different ones; slots freed by closed readers are
//! filled first. Round-robin would not do: after reconnects it can stack the busy connections on
//! one thread. The count is kept exactly: up when a reader is given to a reactor, down once when
//! the reactor lets it go (closed, dropped, or ended by itself, whichever is first).
//! A reactor is started when the first reader is given to it (so a process with one connection at
//! a time runs one thread) and then stays, idle in epoll_wait, for the life of the process: it
//! costs nothing while idle and a reconnecting client does not pay for a new thread. They are
//! plain Rust threads, so interpreter exit neither waits for them nor hangs on them.
//!
//! Per reader the reactor runs a small state machine: the 4-byte size (possibly in pieces), then
//! the frame straight into a `Vec` of exactly that size (no intermediate buffer, no resize, so no
//! copy of big bodies); each whole frame is queued and a notify eventfd the event loop watches is
//! signalled. Readiness is level-triggered and each socket gets at most `TURN_BYTES` per wakeup, so
//! one busy socket cannot starve the others. The loop's thread takes the queued frames as `bytes`
//! (one copy) or as `Frame` buffers that own the `Vec` (no copy). The queue is not bounded: a Kafka
//! client bounds it by the requests it has in flight.
//! EOF, an OSError or a size outside `4..=max_frame_bytes` ends that reader alone (as does a panic
//! while serving it); the reason is handed out once, after every frame completed before it.
//! `close()` (or dropping the reader) asks the reactor to deregister it and waits for the answer:
//! when it returns, the dup is closed and the reactor never touches that reader again. A reactor
//! only ever blocks in epoll_wait, and a command wakes it, so this is prompt.
//! A reactor whose epoll fails or that panics outside a reader ends each of its readers with a
//! "native" reason; its slot then gets a fresh reactor for the next reader.
//! Fork is not supported, only survived: a child process builds a pool of its own for its new
//! readers (the parent's threads are not there); readers inherited across fork are not served in
//! the child, and their `close()` returns at once, leaving the child's copy of the dup open until
//! exit.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::errors::{guarded, panic_message};

/// Bytes one socket may receive per reactor wakeup before the others get their turn: more than a
/// socket buffer holds, so a lone busy socket still empties its buffer in one turn.
const TURN_BYTES: usize = 1 << 20;
/// Ready sockets taken from one epoll_wait.
const EVENTS: usize = 256;
/// The epoll token of the reactor's own wake eventfd (readers' ids count up from 0).
const WAKE: u64 = u64::MAX;

/// Why a reader stopped.
#[derive(Debug)]
enum End {
    /// The peer announced a frame size outside `4..=max_frame_bytes`.
    Size(i32),
    /// EOF after this many bytes of the current frame, its size prefix included (0: between frames).
    Eof(usize),
    /// epoll or recv(2) failed.
    Os(io::Error),
    /// A panic while serving this reader (a bug).
    Panic(String),
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

/// What the reactor has received for one reader and not yet handed out.
#[derive(Default)]
struct Inbox {
    frames: VecDeque<Vec<u8>>,
    end: Option<End>,
}

/// The state the reactor and the Python object share.
struct Shared {
    inbox: Mutex<Inbox>,
    /// Signalled (eventfd) when a frame or the end is queued: the event loop's `add_reader` fd.
    notify: OwnedFd,
}

impl Shared {
    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // A panic while holding the lock left only whole frames behind: keep using them.
        lock(&self.inbox)
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

    /// Every queued frame, and the end once (None while the reader runs or after it was handed out).
    fn take(&self) -> (VecDeque<Vec<u8>>, Option<End>) {
        let mut inbox = self.inbox();
        reset(self.notify.as_raw_fd());
        let end = inbox.end.take();
        (std::mem::take(&mut inbox.frames), end)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// epoll_ctl(2) ADD (readable, level-triggered) or DEL of `fd` under `token`.
fn epoll_ctl(epoll: &OwnedFd, op: c_int, fd: RawFd, token: u64) -> io::Result<()> {
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: event is a live epoll_event (ignored by DEL); bad fds fail with an errno.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &mut event) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One reader as the reactor sees it: its socket and where it is in the current frame.
struct Conn {
    shared: Arc<Shared>,
    socket: OwnedFd,
    max_frame_bytes: usize,
    header: [u8; 4],
    /// Bytes of `header` received; 4 once the body is being received into `body`.
    header_got: usize,
    /// The frame being received: length the bytes received so far, capacity at least `frame_len`.
    body: Vec<u8>,
    /// The size the peer announced for the current frame.
    frame_len: usize,
}

impl Conn {
    /// Receive what the socket has, up to `TURN_BYTES`; `Some` when this reader is done.
    fn receive(&mut self) -> Option<End> {
        let mut budget = TURN_BYTES;
        while budget > 0 {
            let n = if self.header_got < 4 {
                let got = self.header_got;
                let rest = self.header[got..].as_mut_ptr();
                match self.recv(rest, 4 - got) {
                    Ok(Some(n)) => n,
                    Ok(None) => return None,
                    Err(end) => return Some(end),
                }
            } else {
                let want = (self.frame_len - self.body.len()).min(budget);
                // SAFETY: the reserved capacity is at least frame_len, so at least `want` bytes
                // are spare from len on.
                let spare = unsafe { self.body.as_mut_ptr().add(self.body.len()) };
                match self.recv(spare, want) {
                    Ok(Some(n)) => {
                        // SAFETY: recv initialized these n <= want bytes of the spare capacity.
                        unsafe { self.body.set_len(self.body.len() + n) };
                        n
                    }
                    Ok(None) => return None,
                    Err(end) => return Some(end),
                }
            };
            budget = budget.saturating_sub(n);
            if self.header_got < 4 {
                self.header_got += n;
                if self.header_got == 4 {
                    if let Err(end) = self.begin_body() {
                        return Some(end);
                    }
                }
            }
            if self.header_got == 4 && self.body.len() == self.frame_len {
                self.shared.push(std::mem::take(&mut self.body));
                self.header_got = 0;
            }
        }
        None // more may be there: level-triggered epoll says so next turn
    }

    /// The size is whole: check it and reserve exactly that much for the body.
    fn begin_body(&mut self) -> Result<(), End> {
        let size = i32::from_be_bytes(self.header);
        let len = match usize::try_from(size) {
            Ok(len) if (4..=self.max_frame_bytes).contains(&len) => len,
            _ => return Err(End::Size(size)),
        };
        let mut body: Vec<u8> = Vec::new();
        if let Err(err) = body.try_reserve_exact(len) {
            return Err(End::Os(io::Error::new(
                io::ErrorKind::OutOfMemory,
                err.to_string(),
            )));
        }
        self.body = body;
        self.frame_len = len;
        Ok(())
    }

    /// One recv(2) of at most `len` (> 0) bytes into `buf`: `Ok(None)` when nothing is there.
    fn recv(&self, buf: *mut u8, len: usize) -> Result<Option<usize>, End> {
        loop {
            // SAFETY: buf has `len` writable bytes (part of `header` or of the Vec's spare
            // capacity); MSG_DONTWAIT because the fd shares its file description with asyncio.
            let n =
                unsafe { libc::recv(self.socket.as_raw_fd(), buf.cast(), len, libc::MSG_DONTWAIT) };
            if n > 0 {
                return Ok(Some(n as usize));
            }
            if n == 0 {
                let before = if self.header_got < 4 {
                    self.header_got
                } else {
                    4 + self.body.len()
                };
                return Err(End::Eof(before));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => return Ok(None),
                io::ErrorKind::Interrupted => {}
                _ => return Err(End::Os(err)),
            }
        }
    }
}

/// What the Python side asks of the reactor; each is answered once it is done.
enum Command {
    Add {
        id: u64,
        conn: Box<Conn>,
        done: mpsc::Sender<io::Result<()>>,
    },
    Remove {
        id: u64,
        done: mpsc::Sender<()>,
    },
}

#[derive(Default)]
struct Queue {
    commands: Vec<Command>,
    /// The reactor thread is gone (a bug): commands are refused and a new reactor is started.
    dead: bool,
}

/// One I/O thread of the pool: its own epoll instance, wake eventfd and command queue.
struct Reactor {
    epoll: OwnedFd,
    /// Signalled when a command is queued; registered in `epoll` as `WAKE`.
    wake: OwnedFd,
    queue: Mutex<Queue>,
    next_id: AtomicU64,
    /// The readers given to it and not yet retired: counted up under the `POOL` lock when one is
    /// given to it, down by the thread as it retires one (once, whether closed or ended by itself)
    /// and by `start()` when its add failed. The pool gives a new reader to the smallest count.
    readers: AtomicUsize,
    /// The process that started it: after fork(2) the thread is not there.
    pid: u32,
}

/// Reactors in the pool at most, whatever the cores (see the module docs).
const POOL_MAX: usize = 4;

/// The process's reactors, one slot each, started one at a time as readers need them.
struct Pool {
    /// The process that built it: a forked child builds its own.
    pid: u32,
    /// `min(available_parallelism, POOL_MAX)` slots; None until a reader is first given to one.
    slots: Vec<Option<Arc<Reactor>>>,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// The reactor a new reader goes to, with the reader already counted in its `readers`: the one
/// serving the fewest readers (ties: the lowest slot), where an empty slot or a dead reactor
/// counts 0 and is (re)started here.
fn reactor() -> io::Result<Arc<Reactor>> {
    let mut current = lock(&POOL);
    let pid = std::process::id();
    let pool = match current.as_mut() {
        Some(pool) if pool.pid == pid => pool,
        _ => {
            let size = std::thread::available_parallelism()
                .map_or(1, |cores| cores.get())
                .min(POOL_MAX);
            current.insert(Pool {
                pid,
                slots: vec![None; size],
            })
        }
    };
    let load = |slot: &Option<Arc<Reactor>>| match slot {
        Some(reactor) if reactor.alive() => reactor.readers.load(Ordering::Relaxed),
        _ => 0,
    };
    // min_by_key returns the first of equal minima: the lowest slot.
    let slot = pool
        .slots
        .iter_mut()
        .min_by_key(|slot| load(slot))
        .ok_or_else(|| io::Error::other("the frame reader pool has no slot"))?;
    let reactor = match slot {
        Some(reactor) if reactor.alive() => Arc::clone(reactor),
        _ => Arc::clone(slot.insert(Reactor::start()?)),
    };
    reactor.readers.fetch_add(1, Ordering::Relaxed);
    Ok(reactor)
}

impl Reactor {
    /// A new reactor with its thread running.
    fn start() -> io::Result<Arc<Reactor>> {
        // SAFETY: epoll_create1(2) has no memory arguments; a non-negative result is a new fd we
        // own.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: epoll was just created and is owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        let wake = eventfd()?;
        epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, wake.as_raw_fd(), WAKE)?;
        let reactor = Arc::new(Reactor {
            epoll,
            wake,
            queue: Mutex::new(Queue::default()),
            next_id: AtomicU64::new(0),
            readers: AtomicUsize::new(0),
            pid: std::process::id(),
        });
        let for_thread = Arc::clone(&reactor);
        // Detached: it lives as long as the process (see the module docs).
        std::thread::Builder::new()
            .name("aiokafka-frames".to_owned())
            .spawn(move || for_thread.run())?;
        Ok(reactor)
    }

    /// False once the thread is gone (a bug): the pool then starts a new one in its slot.
    fn alive(&self) -> bool {
        !lock(&self.queue).dead
    }

    /// Queue a command and wake the thread; false (the command dropped) when the thread is gone.
    fn send(&self, command: Command) -> bool {
        let mut queue = lock(&self.queue);
        if queue.dead {
            return false;
        }
        queue.commands.push(command);
        drop(queue);
        signal(self.wake.as_raw_fd());
        true
    }

    /// Serve `socket` for `shared` from now on; returns its id once the reactor has registered it.
    fn add(&self, shared: Arc<Shared>, socket: OwnedFd, max_frame_bytes: usize) -> io::Result<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Box::new(Conn {
            shared,
            socket,
            max_frame_bytes,
            header: [0; 4],
            header_got: 0,
            body: Vec::new(),
            frame_len: 0,
        });
        let (done, answer) = mpsc::channel();
        self.send(Command::Add { id, conn, done });
        // No answer: the thread is gone and dropped the command (and with it the socket).
        let gone = || Err(io::Error::other("the frame reader's I/O thread is gone"));
        answer.recv().unwrap_or_else(|_| gone()).map(|()| id)
    }

    /// Stop serving reader `id` and close its socket; returns when the reactor has done so.
    fn remove(&self, id: u64) {
        if self.pid != std::process::id() {
            return; // inherited across fork: no thread here to answer (see the module docs)
        }
        let (done, answer) = mpsc::channel();
        if self.send(Command::Remove { id, done }) {
            // Err: the thread died, and closed every socket as it went.
            let _ = answer.recv();
        }
    }

    /// The thread's body: serve until epoll itself fails (a bug), then end every reader.
    fn run(&self) {
        let mut conns: HashMap<u64, Conn> = HashMap::new();
        let end = match catch_unwind(AssertUnwindSafe(|| self.serve(&mut conns))) {
            Ok(err) => End::Os(err),
            Err(payload) => End::Panic(panic_message(payload.as_ref())),
        };
        let dropped = {
            let mut queue = lock(&self.queue);
            queue.dead = true;
            std::mem::take(&mut queue.commands) // their senders dropped: nobody waits forever
        };
        drop(dropped);
        let message = match &end {
            End::Os(err) => format!("the I/O thread stopped: {err}"),
            End::Panic(message) => message.clone(),
            _ => String::new(),
        };
        for (_, conn) in conns.drain() {
            self.readers.fetch_sub(1, Ordering::Relaxed);
            let shared = Arc::clone(&conn.shared);
            drop(conn);
            shared.finish(End::Panic(message.clone()));
        }
    }

    /// Wait for ready sockets and commands, forever; returns only epoll_wait's failure.
    fn serve(&self, conns: &mut HashMap<u64, Conn>) -> io::Error {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        loop {
            // SAFETY: events is a live buffer of EVENTS epoll_event.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    EVENTS as c_int,
                    -1,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return err;
            }
            let ready = &events[..n as usize];
            // Commands first: a reader removed in this turn is not served in it.
            if ready.iter().any(|event| event.u64 == WAKE) {
                reset(self.wake.as_raw_fd());
                self.obey(conns);
            }
            for event in ready {
                let id = event.u64;
                let Some(conn) = conns.get_mut(&id) else {
                    continue; // the wake fd, or a reader that ended earlier in this turn
                };
                let end = catch_unwind(AssertUnwindSafe(|| conn.receive()))
                    .unwrap_or_else(|payload| Some(End::Panic(panic_message(payload.as_ref()))));
                if let Some(end) = end {
                    if let Some(shared) = self.retire(conns, id) {
                        shared.finish(end); // after the dup is closed, as a thread's end was
                    }
                }
            }
        }
    }

    fn obey(&self, conns: &mut HashMap<u64, Conn>) {
        let commands = std::mem::take(&mut lock(&self.queue).commands);
        for command in commands {
            match command {
                Command::Add { id, conn, done } => {
                    let fd = conn.socket.as_raw_fd();
                    let added = epoll_ctl(&self.epoll, libc::EPOLL_CTL_ADD, fd, id);
                    if added.is_ok() {
                        conns.insert(id, *conn);
                    }
                    let _ = done.send(added);
                }
                Command::Remove { id, done } => {
                    self.retire(conns, id);
                    let _ = done.send(());
                }
            }
        }
    }

    /// Deregister reader `id` and close its dup (in that order: epoll watches the file
    /// description, which the caller's fd keeps open). Its `Shared`, if it was still served.
    fn retire(&self, conns: &mut HashMap<u64, Conn>, id: u64) -> Option<Arc<Shared>> {
        let conn = conns.remove(&id)?;
        // Here and only here (and at the thread's death): a reader is removed from `conns` once.
        self.readers.fetch_sub(1, Ordering::Relaxed);
        let _ = epoll_ctl(
            &self.epoll,
            libc::EPOLL_CTL_DEL,
            conn.socket.as_raw_fd(),
            id,
        );
        let shared = Arc::clone(&conn.shared);
        drop(conn);
        Some(shared)
    }
}

/// A served reader: dropping it deregisters it, closes its dup and (with the last `Arc`) its eventfd.
struct Running {
    shared: Arc<Shared>,
    reactor: Arc<Reactor>,
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.reactor.remove(self.id);
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
    });
    let reactor = reactor()?;
    let id = match reactor.add(Arc::clone(&shared), socket, max_frame_bytes) {
        Ok(id) => id,
        Err(err) => {
            // Never in `conns`, so the thread will not count it down.
            reactor.readers.fetch_sub(1, Ordering::Relaxed);
            return Err(err);
        }
    };
    Ok(Running {
        shared,
        reactor,
        id,
    })
}

/// One received frame handed out without a copy: a read-only buffer over the reactor's `Vec`
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

/// Receives a socket's response frames on one of the process's I/O threads (see the module docs).
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
            let running = py.allow_threads(|| start(fd, max_frame_bytes))?;
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
    /// or with `copy=False` as `Frame` buffers (none); then the reason the reader ended as
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

    /// Stop serving the socket and close the fds (synchronously); frames not yet taken are
    /// dropped. Idempotent.
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
