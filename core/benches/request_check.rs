//! The request check of the engine: a `tools/call` of `echo` as the load
//! benchmark sends it, validated, checked (MCP §5.6, mirrored headers
//! included) and routed, as `Engine::dispatch` does; reported per request
//! byte (criterion's throughput: divide 1 by it for ns per byte). The
//! instruction count of the same work is what `scripts/bench-callgrind.sh`
//! measures with `examples/request_check`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "../examples/request_check/shared.rs"]
mod shared;

fn bench(c: &mut Criterion) {
    let tools = shared::tools();
    let registry = match shared::registry(&tools) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("the request's tools are invalid: {e:?}");
            return;
        }
    };
    let request = shared::echo_request(100);
    let headers = shared::Headers(shared::HEADERS);
    let mut group = c.benchmark_group("request_check");
    group.throughput(Throughput::Bytes(request.len() as u64));
    group.bench_function("tools_call_echo", |b| {
        b.iter(|| shared::check(&registry, std::hint::black_box(&request), &headers))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
