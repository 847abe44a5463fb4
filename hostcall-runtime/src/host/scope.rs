//! Launches that start and end while others run (AMD's hostcall buffers, registered
//! with a running consumer and deregistered at any time), as one process: a
//! [`LaunchServices`] is what serves one launch, beyond the ports and consumer threads each
//! launch gets: its own services on top of the host's, and the GPU it names.

use std::thread::ScopedJoinHandle;
use std::time::Instant;

use super::process::ProcessState;
use super::served::LaunchServices;
use crate::module::{GpuModule, Launch};
use crate::{Error, Host, Result, RunReport};

/// Launches running beside each other as one process: one file table, one sandbox,
/// one stdout and one exit (an `exit` or `abort` in one ends the others at their next
/// hostcall). Each launch's channel, its ports and consumer threads, is registered when
/// it starts and retired when it ends, while the others run on.
pub struct Scope<'scope, 'env: 'scope> {
    host: &'env Host,
    process: ProcessState,
    threads: &'scope std::thread::Scope<'scope, 'env>,
}

/// A launch of a [`Scope`] that may still run.
pub struct Running<'scope> {
    thread: ScopedJoinHandle<'scope, Result<RunReport>>,
}

impl Running<'_> {
    /// Whether the launch has ended and its channel is retired.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the launch to end, and its report.
    pub fn wait(self) -> Result<RunReport> {
        self.thread.join().unwrap_or_else(|_| {
            Err(Error::Service(
                "the thread serving a launch panicked".into(),
            ))
        })
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Starts `launch` on `module`, served with the host's services, and returns while
    /// it runs.
    pub fn launch<M: GpuModule + Send>(
        &self,
        module: &'scope mut M,
        launch: &Launch,
    ) -> Result<Running<'scope>> {
        self.launch_on(module, launch, self.host.launch_services())
    }

    /// Starts `launch` on `module`, served by `services`, and returns while it runs. Its
    /// time limit counts from this call, and it ends once its output is written, as
    /// [`Host::run`]'s does.
    pub fn launch_on<M: GpuModule + Send>(
        &self,
        module: &'scope mut M,
        launch: &Launch,
        services: LaunchServices,
    ) -> Result<Running<'scope>> {
        let called = Instant::now();
        let (host, process, launch) = (self.host, self.process.clone(), launch.clone());
        let name = match services.gpu {
            Some(g) => format!("hostcall-gpu-{g}"),
            None => format!("hostcall-{}", launch.kernel),
        };
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn_scoped(self.threads, move || {
                host.run_in(module, &launch, &process, Some(&services), called)
            })?;
        Ok(Running { thread })
    }
}

impl Host {
    /// A launch's services with none of its own yet, for [`Scope::launch_on`].
    pub fn launch_services(&self) -> LaunchServices {
        LaunchServices {
            declared: self.b.declared.clone(),
            extra: Vec::new(),
            gpu: None,
        }
    }

    /// Runs `f`, in which launches start ([`Scope::launch`]) and end while others run,
    /// as one process; returns once every launch `f` started has ended.
    pub fn scope<'env, R>(&'env self, f: impl for<'scope> FnOnce(&Scope<'scope, 'env>) -> R) -> R {
        let process = self.process_state();
        let result = std::thread::scope(|threads| {
            f(&Scope {
                host: self,
                process: process.clone(),
                threads,
            })
        });
        process.end();
        result
    }
}
