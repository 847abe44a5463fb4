//! An embedder's services, as entries the run registers on top of std's: declared
//! traits, closures, and [`LaunchServices`], those of one launch.

use std::marker::PhantomData;
use std::sync::Arc;

use hostcall_abi::typed::HostFn;
use hostcall_abi::typed::{Args, Dispatch, HostClosure, NAMED_IDS, Ret};

use crate::services::Handler;
use crate::services::lifetime::Life;
use crate::services::typed::{Closure, Declared, methods};

/// An embedder's service: its id, handler, and the name traces give it (by default the
/// std service's, or `service <id>`).
pub(crate) struct Extra {
    pub(super) id: u32,
    pub(super) handler: Arc<dyn Handler>,
    pub(super) name: Option<Arc<str>>,
    /// Its calls left, for a closure served with a [`Lifetime`](crate::Lifetime).
    pub(super) life: Option<Arc<Life>>,
}

/// The entries that serve the declared trait `S` with `imp`, under the ids `declared`
/// gives their names.
pub(crate) fn declared_extras<S, T>(
    declared: &mut Declared,
    imp: T,
    life: Option<Arc<Life>>,
) -> Vec<Extra>
where
    S: ?Sized + Dispatch<T> + 'static,
    T: Send + Sync + 'static,
{
    methods::<S, T>(Arc::new(imp), None)
        .into_iter()
        .map(|(sig, handler)| Extra {
            id: declared.id_for(sig),
            handler,
            name: Some(sig.name.into()),
            life: life.clone(),
        })
        .collect()
}

/// The entry that serves the host closure `f` under the next id of `declared`, and its
/// handle.
pub(crate) fn closure_extra<A, R, F>(
    declared: &mut Declared,
    f: F,
    life: Option<Arc<Life>>,
) -> (Extra, HostFn<A, R>)
where
    A: Args + 'static,
    R: Ret + 'static,
    F: HostClosure<A, R>,
{
    let id = declared.next_id();
    let handler = Arc::new(Closure {
        f,
        _types: PhantomData,
    });
    let name = format!("closure#{}", id - NAMED_IDS.start);
    let extra = Extra {
        id,
        handler,
        name: Some(name.into()),
        life,
    };
    (extra, HostFn::new(id))
}

/// What serves one launch in a [`Scope`](super::Scope) (AMD's hostcall buffer, with its
/// own services): the host's services, and its own on top (a
/// service of the same id replaces the host's for this launch only). Its closures'
/// handles are valid in the launch it serves.
pub struct LaunchServices {
    pub(crate) declared: Declared,
    pub(crate) extra: Vec<Extra>,
    pub(crate) gpu: Option<u32>,
}

impl LaunchServices {
    /// Serves the declared trait `S` (written `dyn Trait`) with `imp` to this launch
    /// only (see [`crate::HostBuilder::serve`]).
    pub fn serve<S, T>(mut self, imp: T) -> LaunchServices
    where
        S: ?Sized + Dispatch<T> + 'static,
        T: Send + Sync + 'static,
    {
        let extras = declared_extras::<S, T>(&mut self.declared, imp, None);
        self.extra.extend(extras);
        self
    }

    /// Serves `f` to this launch only, as [`Host::hostcall`](crate::Host::hostcall) serves to every launch.
    pub fn hostcall<A, R, F>(&mut self, f: F) -> HostFn<A, R>
    where
        A: Args + 'static,
        R: Ret + 'static,
        F: HostClosure<A, R>,
    {
        let (extra, handle) = closure_extra(&mut self.declared, f, None);
        self.extra.push(extra);
        handle
    }

    /// Names the launch's GPU `place` in its thread names (`GPU 1 block 0 thread 3`) and
    /// in the host's lines about its threads.
    pub fn gpu(mut self, place: u32) -> LaunchServices {
        self.gpu = Some(place);
        self
    }
}
