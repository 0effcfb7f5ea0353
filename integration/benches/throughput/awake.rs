//! `IDEM_BENCH_AWAKE=1`: the CPUs held out of their idle states for the
//! run, by a request of zero wake-up latency on `/dev/cpu_dma_latency`
//! (the kernel's PM QoS interface; root only), kept while the file is open.
//!
//! At concurrency 1 each round trip otherwise waits for an idle CPU to
//! wake, on both sides of a comparison, and on a VM that wake-up can cost
//! more than the statement: the figures then measure the wake-up.

use std::fs::File;
use std::io::Write;

/// The request, held until dropped; `None` when not asked for. Exits when
/// asked for and refused, rather than measure something else.
pub(crate) fn hold(report: &mut crate::harness::Report) -> Option<File> {
    std::env::var_os("IDEM_BENCH_AWAKE").filter(|v| v != "0")?;
    let held = File::options()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .and_then(|mut file| file.write_all(&0i32.to_ne_bytes()).map(|()| file));
    match held {
        Ok(file) => {
            report.note(
                "CPUs held out of idle states (`IDEM_BENCH_AWAKE`: `/dev/cpu_dma_latency` = 0)"
                    .to_owned(),
            );
            Some(file)
        }
        Err(err) => {
            eprintln!(
                "IDEM_BENCH_AWAKE: cannot hold /dev/cpu_dma_latency at 0 ({err}); run as root, or unset it"
            );
            std::process::exit(2);
        }
    }
}
