//! `info!`, which goes to defmt (over RTT) with the `defmt` feature
//! and compiles to nothing without it, so that the default build carries no
//! logging code or strings. `main.rs` brings it in with `#[macro_use]`.

#[cfg(feature = "defmt")]
macro_rules! info {
    ($($arg:tt)*) => { defmt::info!($($arg)*) };
}

#[cfg(not(feature = "defmt"))]
macro_rules! info {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        $(let _ = &$arg;)*
    }};
}
