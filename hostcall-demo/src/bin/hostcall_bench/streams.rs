//! The stream rows: tagged messages from every thread, emptied by host reader threads.

use std::time::Duration;

use hostcall_demo::check;
use hostcall_runtime::cuda::CudaModule;
use hostcall_runtime::stream::{Callbacks, StreamSpec, TagCounter};
use hostcall_runtime::{Host, KernelArg, Launch, Outcome};
use serde_json::{Value, json};

use super::*;

/// Messages each thread submits in a stream row.
pub(super) const STREAM_MESSAGES: u32 = 64;

/// One stream row's figures.
pub(super) struct StreamRate {
    /// Messages per second from the first thread's first submit to the last one's last.
    pub(super) gpu: f64,
    /// Messages per second from the launch until the host had taken every one.
    pub(super) end_to_end: f64,
}

/// Runs culinux's `kstream` as `blocks` x 256 threads, each submitting
/// `STREAM_MESSAGES` messages of `words` words to a default stream (rings that wait)
/// emptied by `readers` host threads and counted per tag; insists that every message
/// arrived, once.
pub(super) fn run_stream(
    module: &mut CudaModule,
    spec: StreamSpec,
    words: u32,
    blocks: u32,
    readers: usize,
    count: bool,
) -> Result<StreamRate, String> {
    let mut host = Host::builder()
        .stream_readers(readers)
        .capture_output(true)
        .echo_output(false)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let counter = TagCounter::new();
    let callbacks = if count {
        Callbacks::new().on_every(counter.callback())
    } else {
        Callbacks::new()
    };
    let stream = host.stream(spec, callbacks);
    let args = vec![
        KernelArg::Stream(stream),
        KernelArg::U32(words),
        KernelArg::U32(STREAM_MESSAGES),
    ];
    let r = host
        .run(module, &Launch::linear("kstream", blocks, 256, args))
        .map_err(|e| e.to_string())?;
    if r.outcome != Outcome::Completed {
        return Err(format!(
            "kstream of {words} words at {blocks}x256 ended with {:?}",
            r.outcome
        ));
    }
    let (dropped, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "stream")?;
    let sent = u64::from(blocks) * 256 * u64::from(STREAM_MESSAGES);
    let taken = match count {
        true => counter.counts().get(&words).copied().unwrap_or(0),
        false => sent,
    };
    if dropped != 0 || taken != sent || r.streams[0].messages != sent {
        return Err(format!(
            "kstream of {words} words at {blocks}x256: {sent} sent, {taken} counted, {dropped} dropped"
        ));
    }
    Ok(StreamRate {
        gpu: sent as f64 / (ns as f64 / 1e9),
        end_to_end: sent as f64 / r.elapsed.as_secs_f64(),
    })
}

/// The stream rows: messages/s and GB/s of 8-, 16- and 64-byte messages at 132 x 256
/// and 1056 x 256, against the device-to-pinned-host copy bandwidth and CUDA printf.
pub(super) fn stream_rows(
    module: &mut CudaModule,
    limit: &dyn Fn(&str) -> Option<f64>,
    readers: usize,
    spec: StreamSpec,
) -> Result<Vec<Value>, String> {
    let mut rows = Vec::new();
    let shape = format!(
        "{} rings of {} KiB that wait",
        spec.rings,
        spec.ring_bytes >> 10
    );
    for words in [1, 2, 8] {
        for blocks in [132, 1056] {
            let rate = run_stream(module, spec, words, blocks, readers, true)?;
            let one = run_stream(module, spec, words, blocks, 1, true)?;
            let bare = run_stream(module, spec, words, blocks, readers, false)?;
            let bytes = 8.0 * f64::from(words);
            eprintln!(
                "hostcall_bench: {blocks}x256: {:.2} M stream messages/s of {bytes} bytes ({:.2} GB/s; {:.2} M/s end to end; {:.2} M/s with one host reader, {:.2} M/s with no callback)",
                rate.gpu / 1e6,
                rate.gpu * bytes / 1e9,
                rate.end_to_end / 1e6,
                one.gpu / 1e6,
                bare.gpu / 1e6
            );
            let name = format!("stream_{bytes}_byte_messages_per_s_{blocks}x256");
            let note = format!(
                "{STREAM_MESSAGES} messages of {bytes} bytes per thread, {shape}, emptied by {readers} host threads and counted per tag; GPU time from the first submit to the last; end_to_end_per_s: launch until the host took the last; one_reader_per_s: the same with one host thread; no_callback_per_s: with no callback (messages only counted by the stream)"
            );
            let printf_key = if blocks == 132 {
                "cuda_printf_lines_per_s"
            } else {
                "cuda_printf_lines_per_s_1056x256"
            };
            let mut row = result(
                &name,
                rate.gpu,
                "messages/s",
                limit(printf_key).map(|l| (printf_key, l)),
                &note,
            );
            row["end_to_end_per_s"] = json!(rate.end_to_end);
            row["one_reader_per_s"] = json!(one.gpu);
            row["no_callback_per_s"] = json!(bare.gpu);
            rows.push(row);
            rows.push(result(
                &format!("stream_{bytes}_byte_payload_gb_per_s_{blocks}x256"),
                rate.gpu * bytes / 1e9,
                "GB/s",
                limit("d2h_pinned_copy_gb_per_s").map(|l| ("d2h_pinned_copy_gb_per_s", l)),
                &format!(
                    "the payload of {name} (each message adds an 8-byte header, each batch of a warp's messages an 8-byte commit word)"
                ),
            ));
        }
    }
    Ok(rows)
}
