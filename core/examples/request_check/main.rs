//! Runs the engine's request check of a typical `tools/call` N times (the
//! first argument), for an instruction count under callgrind:
//! `scripts/bench-callgrind.sh` runs it with N and with 0 and divides the
//! difference by N and by the request's length.

mod shared;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let tools = shared::tools();
    let registry = match shared::registry(&tools) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("the request's tools are invalid: {e:?}");
            std::process::exit(1);
        }
    };
    let request = shared::echo_request(100);
    let headers = shared::Headers(shared::HEADERS);
    let mut ok = 0u64;
    for _ in 0..n {
        ok += u64::from(shared::check(
            &registry,
            std::hint::black_box(&request),
            &headers,
        ));
    }
    println!("request_bytes={} checked={ok}", request.len());
}
