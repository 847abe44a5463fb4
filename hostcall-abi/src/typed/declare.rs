//! `service!`: a trait declared once, from which both halves are generated (the host's
//! dispatch and the GPU's client), with every check a declaration can be held to at
//! compile time. It lives below both halves so that std's own declarations
//! (`crate::std_services`) do too.

/// Whether a declaration in module `path` is std's own (`hostcall_abi::std_services`),
/// which alone may fix ids in `STD_IDS`.
#[doc(hidden)]
pub const fn declared_by_std(path: &str) -> bool {
    same_str(path, "hostcall_abi::std_services")
}

/// Whether `a` and `b` are the same text (`str`'s `==` is not `const`).
pub(crate) const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The id a declaration's `= N` gives, or [`UNBOUND`](super::UNBOUND) for a service by name.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_id {
    () => {
        $crate::typed::UNBOUND
    };
    ($id:literal) => {
        $id
    };
}

/// The [`Waits`](super::Waits) a declaration's `, quick`, `, blocks`, `, waits`,
/// `, reads_fd`, `, writes_fd` or `, copies_to_fd` gives (`Waits::Never` when it says
/// nothing); any other word does not compile.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_waits {
    () => {
        $crate::typed::Waits::Never
    };
    (quick) => {
        $crate::typed::Waits::Never
    };
    (blocks) => {
        $crate::typed::Waits::Blocks
    };
    (waits) => {
        $crate::typed::Waits::OnPeer
    };
    (reads_fd) => {
        $crate::typed::Waits::OnFd($crate::typed::FdUse::Read)
    };
    (writes_fd) => {
        $crate::typed::Waits::OnFd($crate::typed::FdUse::Write)
    };
    (copies_to_fd) => {
        $crate::typed::Waits::OnFd($crate::typed::FdUse::CopyOut)
    };
}

/// Whether a declaration says how long its calls may wait (std's must).
#[doc(hidden)]
#[macro_export]
macro_rules! __service_stated {
    () => {
        false
    };
    ($how:ident) => {
        true
    };
}

/// The text of one declared method's signature, spaced as rustfmt would.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_text {
    ($m:ident, ($($a:ident : $t:ty),*), $r:ty) => {
        concat!(
            "fn ", stringify!($m), "(&self",
            $(", ", stringify!($a), ": ", stringify!($t),)*
            ") -> ", stringify!($r)
        )
    };
}

/// The [`Signature`](super::Signature) of one declared method.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_signature {
    ($trait:ident, $m:ident, ($($a:ident : $t:ty),*), $r:ty, ($($id:literal)?), ($($how:ident)?)) => {
        $crate::typed::Signature {
            name: concat!(stringify!($trait), ".", stringify!($m)),
            text: $crate::__service_text!($m, ($($a: $t),*), $r),
            id: $crate::__service_id!($($id)?),
            fingerprint: $crate::typed::fingerprint(
                concat!(stringify!($trait), ".", stringify!($m)),
                $crate::__service_text!($m, ($($a: $t),*), $r),
                $crate::__service_id!($($id)?),
                &[$(<$t as $crate::typed::Arg<'static>>::SHAPE),*],
                $crate::typed::Shape::of::<<$r as $crate::typed::Ret>::Value>(),
            ),
            reads_input: $crate::typed::reads_input(
                &[$(<$t as $crate::typed::Arg<'static>>::SHAPE),*],
            ),
            waits: $crate::__service_waits!($($how)?),
            answer: $crate::typed::answer_bytes(
                &[$(<$t as $crate::typed::Arg<'static>>::SHAPE),*],
                size_of::<<$r as $crate::typed::Ret>::Value>(),
            ),
        }
    };
}

/// Declares host services as a trait, once, for both sides.
///
/// ```ignore
/// hostcall_abi::service! {
///     /// A key-value store on the host.
///     pub trait Kv {
///         /// The value of `key`.
///         fn get(&self, key: &str) -> Result<u64, Errno>;
///         /// Sets `key`; a fixed id, as AMD's hostcall API numbers services.
///         fn set(&self, key: &str, value: u64) -> () = 7;
///     }
/// }
/// ```
///
/// Each method is a service named `Trait.method`. Arguments are [`Plain`](super::Plain) values,
/// `&[u8]`, `&str`, and at most one `&mut [u8]` the host fills; results are a `Plain`
/// value or a `Result` of one with an [`Errno`](super::Errno). From the declaration:
/// * the trait itself, which the host implements (a missing method does not compile);
/// * [`Client<C, dyn Trait>`](super::Client) implements it, each method a call through
///   the [`Caller`](super::Caller) `C` (`hostcall_client::typed::Client::gpu()` in a
///   kernel);
/// * `<dyn Trait>::SERVICES` lists the signatures, and `dyn Trait` implements
///   `Dispatch`, which the host runtime serves (`HostBuilder::serve`);
/// * on the GPU, each method the kernel calls leaves a `__HOSTCALL__Trait__method` slot
///   in the module (name, signature, fingerprint), which the host checks when it loads
///   the module and fills with the service's id.
///
/// A method with `= N` has the fixed id `N` (in `USER_IDS`); others are bound by name
/// when the module is loaded. Two methods of one declaration with one id do not compile.
///
/// A method whose calls may keep the host long says so after its id (or in its place):
/// `, blocks` (a file system, a terminal: the host serves it on its blocking pool) or
/// `, waits` (as long as another party likes, such as another GPU thread: it gets a pool
/// worker of its own); `, quick`, the default, is served at once on the thread that
/// polled it ([`Waits`](super::Waits)). std's own declarations may also say what the
/// method does with the fd its first argument names (`, reads_fd`, `, writes_fd`,
/// `, copies_to_fd`): the host then decides per call, from the fd, where to serve it.
#[macro_export]
macro_rules! service {
    (
        $(#[$tmeta:meta])*
        $vis:vis trait $trait:ident {
            $(
                $(#[$mmeta:meta])*
                fn $m:ident(&self $(, $a:ident : $t:ty)* $(,)?) -> $r:ty
                    $(= $id:literal)? $(, $how:ident)?;
            )*
        }
    ) => {
        $(#[$tmeta])*
        $vis trait $trait: Send + Sync + 'static {
            $(
                $(#[$mmeta])*
                fn $m(&self $(, $a: $t)*) -> $r;
            )*
        }

        impl dyn $trait {
            /// Every service of this trait, in declaration order.
            pub const SERVICES: &'static [$crate::typed::Signature] = &[
                $($crate::__service_signature!($trait, $m, ($($a: $t),*), $r, ($($id)?), ($($how)?))),*
            ];
        }

        const _: () = assert!(
            $crate::typed::ids_distinct(&[<dyn $trait>::SERVICES], &[]),
            "two methods of one declaration share a fixed id"
        );

        impl<C> $trait for $crate::typed::Client<C, dyn $trait>
        where
            C: $crate::typed::Caller + Send + Sync + 'static,
        {
            $(
                fn $m(&self $(, $a: $t)*) -> $r {
                    use $crate::typed as abi;
                    const SIG: abi::Signature =
                        $crate::__service_signature!($trait, $m, ($($a: $t),*), $r, ($($id)?), ($($how)?));
                    const SHAPES: &[abi::Shape] = &[$(<$t as abi::Arg<'static>>::SHAPE),*];
                    const FIXED: usize = abi::fixed_len(SHAPES);
                    const _: () = {
                        assert!(FIXED <= abi::FIXED_MAX, "arguments over FIXED_MAX bytes");
                        assert!(
                            abi::count_kind(SHAPES, 1) + abi::count_kind(SHAPES, 3)
                                + (FIXED > abi::FIXED_INLINE) as usize
                                <= abi::MAX_INPUTS,
                            "more slices than MAX_INPUTS"
                        );
                        assert!(abi::count_kind(SHAPES, 2) <= 1, "more than one output buffer");
                        assert!(
                            size_of::<<$r as abi::Ret>::Value>() <= abi::VALUE_MAX,
                            "a value over the bulk buffer"
                        );
                        assert!(
                            abi::count_kind(SHAPES, 2) == 0
                                || !matches!(
                                    abi::value_place::<<$r as abi::Ret>::Value>(),
                                    abi::ValuePlace::Bulk
                                ),
                            "an output buffer beside a value over 32 bytes"
                        );
                        assert!(
                            SIG.id == abi::UNBOUND
                                || (abi::USER_IDS.start <= SIG.id && SIG.id < abi::USER_IDS.end)
                                || (abi::STD_IDS.start <= SIG.id
                                    && SIG.id < abi::STD_IDS.end
                                    && $crate::typed::declared_by_std(module_path!())),
                            "a fixed id outside USER_IDS (std's own declarations take STD_IDS)"
                        );
                        assert!(
                            $crate::__service_stated!($($how)?)
                                || !$crate::typed::declared_by_std(module_path!()),
                            "std's declarations say whether each method is quick, blocks or waits"
                        );
                        assert!(
                            !matches!(SIG.waits, abi::Waits::OnFd(_))
                                || ($crate::typed::declared_by_std(module_path!())
                                    && abi::first_is_fd(SHAPES)),
                            "only std's declarations name an fd's use, and its first argument is the fd (an i32)"
                        );
                    };
                    #[cfg_attr(
                        target_arch = "nvptx64",
                        unsafe(export_name = concat!(
                            "__HOSTCALL__", stringify!($trait), "__", stringify!($m)
                        ))
                    )]
                    static SLOT: abi::ServiceSlot<{ SIG.name.len() + SIG.text.len() }> =
                        abi::ServiceSlot::new(&SIG);
                    const WORDS: usize = abi::fixed_words(FIXED);
                    #[allow(unused_mut)] // no arguments: nothing to add
                    let mut e = abi::Encoder::<'_, WORDS>::default();
                    $(abi::Arg::put($a, &mut e);)*
                    let caller = self.caller();
                    let id = abi::Caller::service_id(caller, &SLOT.id, SIG.name);
                    abi::Caller::call::<$r, WORDS>(caller, id, FIXED, &mut e)
                }
            )*
        }

        #[cfg(not(target_arch = "nvptx64"))]
        impl<T: $trait> $crate::typed::Dispatch<T> for dyn $trait {
            const SERVICES: &'static [$crate::typed::Signature] = <dyn $trait>::SERVICES;

            #[allow(unused_assignments, unused_mut, unused_variables)]
            fn dispatch(
                imp: &T,
                method: usize,
                call: $crate::typed::Incoming<'_>,
                mut trace: Option<&mut dyn core::fmt::Write>,
            ) -> Result<$crate::typed::Answered, $crate::typed::WireError> {
                use $crate::typed as abi;
                let mut index = 0usize;
                $(
                    if method == index {
                        const FIXED: usize =
                            abi::fixed_len(&[$(<$t as abi::Arg<'static>>::SHAPE),*]);
                        let fixed = abi::args_bytes(&call.args);
                        let mut d = abi::Decoder::new(
                            FIXED,
                            &fixed,
                            call.input,
                            &mut *call.out,
                            call.device,
                        )?;
                        $(let $a = <$t as abi::Arg>::take(&mut d)?;)*
                        let out_len = d.output_len();
                        if let Some(w) = trace.as_deref_mut() {
                            let _ = w.write_str(concat!(stringify!($m), "("));
                            let mut first = true;
                            $(
                                if !core::mem::take(&mut first) {
                                    let _ = w.write_str(", ");
                                }
                                let _ = <$t as abi::Arg>::show(&$a, w);
                            )*
                            let _ = w.write_str(")");
                        }
                        let r: $r = imp.$m($($a),*);
                        if let Some(w) = trace.as_deref_mut() {
                            let _ = core::fmt::Write::write_fmt(w, format_args!(" -> {:?}", r));
                        }
                        let v = <$r as abi::Ret>::into_wire(r);
                        return Ok(abi::Answered::encode(v, call.out, out_len));
                    }
                    index += 1;
                )*
                Err(abi::WireError("no such method"))
            }
        }
    };
}
