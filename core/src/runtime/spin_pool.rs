//! The one thread pool the CPU kernels split their work on: a team of worker threads that spin between jobs.
//!
//! Rayon parks an idle worker after a short spin, and waking it (a futex call, then the scheduler) costs
//! 10-50 µs on this project's 2-vCPU machines: more than a whole int8 convolution of a 96×96 MobileNetV2. So
//! those kernels ran on one thread even with `--threads 2`, and 2 threads were no faster than 1. The team here
//! keeps its workers spinning for [`SPIN`] after each job (XNNPACK's pthreadpool and onnxruntime's pool do the
//! same), so that the next operator of the same run hands out its tasks in well under a microsecond; a worker
//! that saw no job for that long parks on a condition variable, and the next job wakes it.
//!
//! One job at a time per team: a job is `tasks` calls `f(i)`, handed out through one atomic range to the
//! calling thread (from the front) and the workers (from the back). The team has `rayon::current_num_threads() - 1` workers (so `--threads` sets it);
//! teams are made on first use, one per size, and live for the process. A caller that finds its team busy
//! (another thread's job) runs its tasks itself; so does a task that splits work of its own (nested splits run
//! serially inside the outer task).
//!
//! Every kernel splits on this team, none on rayon (whose pool only sets the thread count): with two pools on a
//! 2-core machine, the idle one's spinning workers took the core the other's tasks needed (moving only the
//! GEMMs here made a YOLOv8-style model 11-22% slower at 2 threads while rayon still ran its elementwise ops).
//! The workers adopt the caller's flush-to-zero setting for each job ([`super::fp_env`]), so a value does not
//! depend on the thread that computed it.
//!
//! Safety argument (the one `unsafe` here, the lifetime of `f`): the job's closure pointer is published only
//! between `state = RUNNING` and `state = IDLE`; a worker counts itself in `active` before it reads the job
//! and checks the state after (both SeqCst), and the caller waits for `active == 0` after setting IDLE, so
//! no worker touches `f` after [`run`] returns (either the caller's wait saw the worker's increment, or the
//! worker's check saw IDLE and it backs out without reading the job).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a worker spins for the next job before it parks.
const SPIN: Duration = Duration::from_micros(300);

/// The job being run: a type-erased `&(dyn Fn(usize) + Sync)` and its task count.
struct Job {
    f: *const (dyn Fn(usize) + Sync),
    tasks: usize,
    /// The caller's flush-to-zero setting ([`super::fp_env`]), which the workers adopt for the job: a value must
    /// not depend on the thread that computed it.
    flush: bool,
}

struct Shared {
    /// Job number, odd while a job runs (its tasks may be taken), even between jobs.
    state: AtomicU64,
    /// The current job (valid while `state` is odd); a `Box<Job>` leaked for the job's duration.
    job: AtomicPtr<Job>,
    /// The current job's tasks not yet taken, `[lo, hi)` packed as `hi << 32 | lo`: the caller takes them from
    /// the front, the workers from the back (see [`take_tasks`]).
    left: AtomicU64,
    /// Workers inside the current job (counted before they read it).
    active: AtomicUsize,
    /// A worker's task panicked (its payload is kept in `panic`).
    panicked: AtomicBool,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Parked workers, and the lock and condition they wait on.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    /// Held by the thread whose job runs.
    busy: Mutex<()>,
}

/// A team of `workers` spinning threads (see the module documentation).
struct Team {
    shared: Arc<Shared>,
    workers: usize,
}

impl Team {
    fn new(workers: usize) -> Option<Team> {
        let shared = Arc::new(Shared {
            state: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            left: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            panic: Mutex::new(None),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            busy: Mutex::new(()),
        });
        for i in 0..workers {
            let s = Arc::clone(&shared);
            // a team that cannot start its threads is not made: callers then run serially
            std::thread::Builder::new().name(format!("tpu-sdk-spin-{i}")).spawn(move || worker(&s)).ok()?;
        }
        Some(Team { shared, workers })
    }
}

/// Takes and runs tasks of the current job until none is left: the caller (`front`) from the first index up,
/// the workers from the last down. So with two threads each runs a contiguous run of tasks, as rayon's halving
/// did: neighbouring tasks share operands (a GEMM's column blocks of one row block, a convolution's adjacent
/// tiles), and handing out alternate indices made both cores' caches hold all of them.
fn take_tasks(s: &Shared, job: &Job, front: bool) {
    loop {
        let mut cur = s.left.load(SeqCst);
        let i = loop {
            let (lo, hi) = (cur & 0xFFFF_FFFF, cur >> 32);
            if lo >= hi {
                return;
            }
            let (i, next) = if front { (lo, hi << 32 | (lo + 1)) } else { (hi - 1, (hi - 1) << 32 | lo) };
            match s.left.compare_exchange_weak(cur, next, SeqCst, SeqCst) {
                Ok(_) => break i as usize,
                Err(now) => cur = now,
            }
        };
        debug_assert!(i < job.tasks);
        // SAFETY: the job (and so its closure) outlives every worker counted in `active` (module documentation).
        let f = unsafe { &*job.f };
        f(i);
    }
}

thread_local! {
    /// Set on the team's workers, and on a caller while it runs its job's tasks: a split asked for inside a task
    /// runs serially (whatever team the thread's rayon pool size would pick).
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn worker(s: &Shared) {
    IN_TASK.with(|t| t.set(true));
    let mut seen = 0u64;
    loop {
        // wait for a job newer than the last one seen: spin, then park
        let start = Instant::now();
        let mut spins = 0u32;
        let state = loop {
            let st = s.state.load(SeqCst);
            if st % 2 == 1 && st != seen {
                break st;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && start.elapsed() > SPIN {
                let guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, SeqCst);
                let st = s.state.load(SeqCst);
                if !(st % 2 == 1 && st != seen) {
                    drop(s.wake.wait(guard).unwrap_or_else(|e| e.into_inner()));
                }
                s.sleepers.fetch_sub(1, SeqCst);
                spins = 0;
                continue;
            }
            std::hint::spin_loop();
        };
        s.active.fetch_add(1, SeqCst);
        if s.state.load(SeqCst) != state {
            // that job ended (or another began) before this worker joined it
            s.active.fetch_sub(1, SeqCst);
            continue;
        }
        seen = state;
        // SAFETY: state is odd and unchanged after this worker counted itself in: the job pointer is live
        // until the caller sees active == 0.
        let job = unsafe { &*s.job.load(SeqCst) };
        super::fp_env::set_flush(job.flush);
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| take_tasks(s, job, false))) {
            *s.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
            s.panicked.store(true, SeqCst);
            // the remaining tasks are still taken by the others; this worker's unfinished one is lost, and the
            // caller re-raises the panic
        }
        s.active.fetch_sub(1, SeqCst);
    }
}

/// The team for the current rayon pool's size, made on first use; `None` for one thread.
fn team() -> Option<&'static Team> {
    static TEAMS: OnceLock<Mutex<Vec<&'static Team>>> = OnceLock::new();
    let threads = rayon::current_num_threads();
    if threads < 2 {
        return None;
    }
    let mut teams = TEAMS.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = teams.iter().find(|t| t.workers == threads - 1) {
        return Some(t);
    }
    // teams live for the process (their threads park when idle); one per thread count ever asked for
    let t: &'static Team = Box::leak(Box::new(Team::new(threads - 1)?));
    teams.push(t);
    Some(t)
}

/// Calls `f(i)` for every `i < tasks`, on the calling thread and the spinning team of the current rayon pool's
/// size (each index once, in no particular order); serially with one thread, one task, or a team busy with
/// another caller's job. A panic in a task is raised again here after every task has ended.
pub(crate) fn run(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    let team = if tasks > 1 && tasks < 1 << 32 && !IN_TASK.with(|t| t.get()) { team() } else { None };
    let Some(team) = team else {
        (0..tasks).for_each(f);
        return;
    };
    let s = &*team.shared;
    let Ok(_busy) = s.busy.try_lock() else {
        (0..tasks).for_each(f);
        return;
    };
    // SAFETY (lifetime erasure): the pointer is used only while this call waits (module documentation).
    let f_static: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f) };
    let job = Box::into_raw(Box::new(Job { f: f_static, tasks, flush: super::fp_env::denormals_flushed() }));
    s.job.store(job, SeqCst);
    s.left.store((tasks as u64) << 32, SeqCst);
    s.state.fetch_add(1, SeqCst); // odd: running
    if s.sleepers.load(SeqCst) > 0 {
        let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
        s.wake.notify_all();
    }
    // SAFETY: the job was just made and is freed only below.
    IN_TASK.with(|t| t.set(true));
    let mine = catch_unwind(AssertUnwindSafe(|| take_tasks(s, unsafe { &*job }, true)));
    IN_TASK.with(|t| t.set(false));
    s.state.fetch_add(1, SeqCst); // even: ended; no worker joins any more
    while s.active.load(SeqCst) != 0 {
        std::hint::spin_loop();
    }
    s.job.store(std::ptr::null_mut(), SeqCst);
    // SAFETY: made by Box::into_raw above; no worker holds it (active == 0 after the state change).
    drop(unsafe { Box::from_raw(job) });
    if let Err(p) = mine {
        resume_unwind(p);
    }
    if s.panicked.swap(false, SeqCst) {
        if let Some(p) = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            resume_unwind(p);
        }
    }
}

/// Calls `f(i, chunk)` for the consecutive `chunk`-long pieces of `data` (the last may be shorter) through
/// [`run`].
pub(crate) fn for_each_chunk_mut<T: Send>(data: &mut [T], chunk: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    let chunk = chunk.max(1);
    let (ptr, len) = (SendPtr(data.as_mut_ptr()), data.len());
    let tasks = len.div_ceil(chunk);
    run(tasks, &|i| {
        let ptr = &ptr;
        let start = i * chunk;
        let n = chunk.min(len - start);
        // SAFETY: run calls each index once, so the pieces [i·chunk, i·chunk + n) are disjoint parts of `data`,
        // which stays mutably borrowed by this call until every task has ended.
        let piece = unsafe { std::slice::from_raw_parts_mut(ptr.0.add(start), n) };
        f(i, piece)
    });
}

/// Calls `f(&mut state, i, piece)` for each `unit`-long piece `i` of `data` (the last may be shorter) through
/// [`for_each_chunk_mut`]: the pieces in runs of about two per thread, each run with its own `init()` state (a
/// task's scratch buffers).
pub(crate) fn for_each_piece_mut<T: Send, S>(data: &mut [T], unit: usize, init: impl Fn() -> S + Sync, f: impl Fn(&mut S, usize, &mut [T]) + Sync) {
    let unit = unit.max(1);
    let per = data.len().div_ceil(unit).div_ceil(2 * threads()).max(1);
    for_each_chunk_mut(data, per * unit, &|t, run| {
        let mut state = init();
        for (k, piece) in run.chunks_mut(unit).enumerate() {
            f(&mut state, t * per + k, piece);
        }
    });
}

/// Calls `f(i, a_piece, b_piece)` for the `i`-th `ca`-long piece of `a` and `cb`-long piece of `b` together
/// (as many tasks as the shorter split has pieces) through [`run`].
pub(crate) fn for_each_chunk_mut2<A: Send, B: Send>(a: &mut [A], ca: usize, b: &mut [B], cb: usize, f: &(dyn Fn(usize, &mut [A], &mut [B]) + Sync)) {
    let (ca, cb) = (ca.max(1), cb.max(1));
    let (pa, la, pb, lb) = (SendPtr(a.as_mut_ptr()), a.len(), SendPtr(b.as_mut_ptr()), b.len());
    let tasks = la.div_ceil(ca).min(lb.div_ceil(cb));
    run(tasks, &|i| {
        let (pa, pb) = (&pa, &pb);
        let (sa, sb) = (i * ca, i * cb);
        // SAFETY: as in for_each_chunk_mut, for each of the two slices (each index once: disjoint pieces).
        let (x, y) = unsafe { (std::slice::from_raw_parts_mut(pa.0.add(sa), ca.min(la - sa)), std::slice::from_raw_parts_mut(pb.0.add(sb), cb.min(lb - sb))) };
        f(i, x, y)
    });
}

/// Runs `a` and `b`, on two threads of the team when it has them, and returns both results.
pub(crate) fn join<RA: Send, RB: Send>(a: impl FnOnce() -> RA + Send, b: impl FnOnce() -> RB + Send) -> (RA, RB) {
    let (a, b) = (Mutex::new(Some(a)), Mutex::new(Some(b)));
    let (ra, rb) = (Mutex::new(None), Mutex::new(None));
    run(2, &|i| {
        if i == 0 {
            let f = a.lock().unwrap_or_else(|e| e.into_inner()).take().expect("task 0 runs once");
            *ra.lock().unwrap_or_else(|e| e.into_inner()) = Some(f());
        } else {
            let f = b.lock().unwrap_or_else(|e| e.into_inner()).take().expect("task 1 runs once");
            *rb.lock().unwrap_or_else(|e| e.into_inner()) = Some(f());
        }
    });
    fn take<R>(m: Mutex<Option<R>>) -> R {
        m.into_inner().unwrap_or_else(|e| e.into_inner()).expect("both tasks ran")
    }
    (take(ra), take(rb))
}

/// `work` scaled by `TPU_SDK_SPLIT_SCALE` (a factor ≥ 0, default 1; read once): the kernels' least work worth splitting, for
/// measuring the thresholds.
pub(crate) fn min_work(work: usize) -> usize {
    static SCALE: OnceLock<f64> = OnceLock::new();
    let scale = *SCALE.get_or_init(|| std::env::var("TPU_SDK_SPLIT_SCALE").ok().and_then(|v| v.parse().ok()).filter(|s: &f64| *s >= 0.0).unwrap_or(1.0));
    (work as f64 * scale) as usize
}

/// True on a thread running one of a job's tasks, where a split runs serially ([`run`]): a kernel that would
/// split work inside a task (a smaller split than its caller's) does better to run it whole.
pub(crate) fn in_task() -> bool {
    IN_TASK.with(|t| t.get())
}

/// The number of threads kernels split their work over: the current rayon pool's size (which `--threads` sets).
pub(crate) fn threads() -> usize {
    rayon::current_num_threads().max(1)
}

/// A raw pointer that tasks on other threads may use (disjointness is argued where it is dereferenced).
struct SendPtr<T>(*mut T);
// SAFETY: only dereferenced in for_each_chunk_mut, each task on its own piece; T: Send.
unsafe impl<T: Send> Sync for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SendPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn on_threads<R: Send>(n: usize, f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap().install(f)
    }

    /// Every index runs exactly once, job after job (with and without parking between them), on 1 to 3 threads.
    #[test]
    fn each_task_runs_once() {
        for threads in [1, 2, 3] {
            on_threads(threads, || {
                for round in 0..300 {
                    let tasks = round % 37;
                    let hits: Vec<AtomicU32> = (0..tasks).map(|_| AtomicU32::new(0)).collect();
                    run(tasks, &|i| {
                        hits[i].fetch_add(1, SeqCst);
                    });
                    assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "{threads} threads, round {round}");
                    if round % 100 == 99 {
                        std::thread::sleep(SPIN * 3); // let the workers park
                    }
                }
            });
        }
    }

    #[test]
    fn paired_chunks_cover_both_slices_and_join_returns_both() {
        on_threads(2, || {
            let (mut a, mut b) = (vec![0usize; 95], vec![0usize; 40]);
            for_each_chunk_mut2(&mut a, 10, &mut b, 4, &|i, x, y| {
                x.iter_mut().for_each(|v| *v = i + 1);
                y.iter_mut().for_each(|v| *v = i + 1);
            });
            assert!(a.iter().enumerate().all(|(k, &v)| v == k / 10 + 1), "{a:?}");
            assert!(b.iter().enumerate().all(|(k, &v)| v == k / 4 + 1), "{b:?}");
            let (x, y) = join(|| 3, || "b");
            assert_eq!((x, y), (3, "b"));
        });
    }

    /// The workers compute with the caller's flush-to-zero setting.
    #[test]
    fn workers_adopt_the_callers_denormal_setting() {
        on_threads(2, || {
            for on in [true, false, true] {
                let prev = crate::runtime::fp_env::denormals_flushed();
                crate::runtime::fp_env::set_flush(on);
                let seen: Vec<AtomicBool> = (0..64).map(|_| AtomicBool::new(!on)).collect();
                run(64, &|i| {
                    std::thread::sleep(Duration::from_micros(50));
                    seen[i].store(crate::runtime::fp_env::denormals_flushed(), SeqCst);
                });
                crate::runtime::fp_env::set_flush(prev);
                if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
                    assert!(seen.iter().all(|s| s.load(SeqCst) == on), "flush {on}");
                }
            }
        });
    }

    /// A split inside a task runs serially on the thread that asked, on any team size.
    #[test]
    fn nested_splits_run_inside_their_task() {
        for threads in [2, 3] {
            on_threads(threads, || {
                let total = AtomicUsize::new(0);
                run(8, &|_| {
                    let me = std::thread::current().id();
                    run(4, &|_| {
                        assert_eq!(std::thread::current().id(), me);
                        total.fetch_add(1, SeqCst);
                    });
                });
                assert_eq!(total.load(SeqCst), 32);
            });
        }
    }

    #[test]
    fn chunks_cover_the_slice() {
        on_threads(2, || {
            let mut v = vec![0usize; 1003];
            for_each_chunk_mut(&mut v, 10, &|i, c| c.iter_mut().enumerate().for_each(|(k, x)| *x = i * 10 + k));
            assert!(v.iter().enumerate().all(|(i, &x)| x == i));
        });
    }

    #[test]
    fn pieces_get_their_index_and_a_state_per_run() {
        on_threads(2, || {
            let mut v = vec![0usize; 103];
            let inits = AtomicUsize::new(0);
            for_each_piece_mut(&mut v, 5, || inits.fetch_add(1, SeqCst), |_, i, piece| piece.iter_mut().enumerate().for_each(|(k, x)| *x = i * 5 + k));
            assert!(v.iter().enumerate().all(|(i, &x)| x == i));
            assert!(inits.load(SeqCst) <= 4, "one state per run, about two runs per thread");
        });
    }

    #[test]
    fn a_panicking_task_panics_the_caller_and_the_team_goes_on() {
        on_threads(2, || {
            let r = catch_unwind(|| run(64, &|i| assert!(i != 40, "task 40 fails")));
            assert!(r.is_err());
            let n = AtomicUsize::new(0);
            run(64, &|_| {
                n.fetch_add(1, SeqCst);
            });
            assert_eq!(n.load(SeqCst), 64);
        });
    }

    /// Jobs from two threads at once: one runs on the team, the other serially; both complete.
    #[test]
    fn concurrent_callers_both_finish() {
        on_threads(2, || {
            let total = AtomicUsize::new(0);
            std::thread::scope(|sc| {
                for _ in 0..2 {
                    sc.spawn(|| {
                        on_threads(2, || {
                            for _ in 0..200 {
                                run(16, &|_| {
                                    total.fetch_add(1, SeqCst);
                                });
                            }
                        })
                    });
                }
            });
            assert_eq!(total.load(SeqCst), 2 * 200 * 16);
        });
    }
}
