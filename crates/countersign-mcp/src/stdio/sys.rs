//! The two operating-system calls the standard library does not offer: a child that dies with
//! its parent, and a signal to a whole process group. Linux only; elsewhere they do nothing.

#![allow(unsafe_code)]

/// Makes the child about to be executed receive SIGKILL when the thread that started it ends
/// (the engine's runtime threads live as long as the engine), so a kill -9 of the engine
/// leaves no server behind. Runs between `fork` and `exec`.
pub(super) fn die_with_parent(command: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    // SAFETY: `prctl` and `getppid` are async-signal-safe and touch no memory of ours; the
    // closure allocates nothing, as code between fork and exec must not.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the call: then nobody would send the signal.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the engine ended while starting"));
            }
            Ok(())
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

/// Sends `signal` to the process group `pgid` (the server and whatever it started). A group
/// that is already gone is not an error.
pub(super) fn signal_group(pgid: u32, signal: Signal) {
    #[cfg(unix)]
    {
        let Ok(pgid) = libc::pid_t::try_from(pgid) else {
            return;
        };
        if pgid <= 1 {
            return;
        }
        let signal = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: `killpg` takes plain integers and has no memory effects in this process.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
    #[cfg(not(unix))]
    let _ = (pgid, signal);
}

/// Sends `signal` to one process.
pub(super) fn signal_process(pid: u32, signal: Signal) {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return;
        };
        if pid <= 1 {
            return;
        }
        let signal = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: `kill` takes plain integers and has no memory effects in this process.
        unsafe {
            libc::kill(pid, signal);
        }
    }
    #[cfg(not(unix))]
    let _ = (pid, signal);
}

/// Whether the process group `pgid` still has a member.
pub(super) fn group_alive(pgid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pgid) = libc::pid_t::try_from(pgid) else {
            return false;
        };
        // SAFETY: signal 0 only checks for existence and permission.
        unsafe { libc::killpg(pgid, 0) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
        false
    }
}

/// The signals we send.
#[derive(Debug, Clone, Copy)]
pub(super) enum Signal {
    Term,
    Kill,
}
