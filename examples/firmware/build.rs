//! Linker scripts. embassy-stm32 (feature `memory-x`) writes the chip's
//! `memory.x`; cortex-m-rt's `link.x` includes it. defmt's `defmt.x` is
//! added only with the `defmt` feature, which a `.cargo/config.toml`
//! rustflag could not express.

fn main() {
    println!("cargo:rustc-link-arg-bins=--nmagic");
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    if std::env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
