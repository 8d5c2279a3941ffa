//! `info!` and `warn!`, which go to defmt (over RTT) with the `defmt`
//! feature and compile to nothing without it, so that the default build
//! carries no logging code or strings. `main.rs` brings them in with
//! `#[macro_use]`.

#[cfg(feature = "defmt")]
macro_rules! info {
    ($($arg:tt)*) => { defmt::info!($($arg)*) };
}

#[cfg(feature = "defmt")]
macro_rules! warn {
    ($($arg:tt)*) => { defmt::warn!($($arg)*) };
}

#[cfg(not(feature = "defmt"))]
macro_rules! info {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        $(let _ = &$arg;)*
    }};
}

#[cfg(not(feature = "defmt"))]
macro_rules! warn {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        $(let _ = &$arg;)*
    }};
}
