//! A takeover by another process on `DynamoDbStore`: a worker process
//! claims a key and is SIGKILLed in the middle of its body; its claim
//! stands (in progress, or lapsed once its lease runs out, never
//! completed), and once it has lapsed a call from this process takes it
//! over: the reconcile is asked (the takeover's sign, `took_over`), it
//! sees the child key the dead holder sent downstream, the body runs once,
//! and its result is replayed. On dynoxide and on moto.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use idem::admin::{Admin, RecordState};
use idem::key::RecordKey;
use idem::store::Token;
use idem::{DynamoDbStore, Error, Idempotency};

use crate::support::dynamodb_server::{self, Emulator};
use crate::support::test_name;

/// The worker's `url table`; unset, the worker test does nothing.
const WORKER: &str = "IDEM_DYNAMODB_TAKEOVER_WORKER";
/// The worker's lease: long enough that a loaded machine never lets it
/// lapse while the worker still renews it, short enough to wait out.
const LEASE: Duration = Duration::from_secs(5);

async fn a_sigkilled_holder_is_taken_over(emulator: Emulator) {
    let url = dynamodb_server::url(emulator).await;
    let table = format!("idem-px-{:x}", Token::random().to_u128() as u64);
    let store = DynamoDbStore::new(dynamodb_server::client(&url), &table);
    store.create_table().await.expect("create the table");
    let mut worker = Command::new(std::env::current_exe().unwrap())
        .args([
            test_name(module_path!(), "takeover_worker").as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WORKER, format!("{url} {table}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the worker");
    // The worker prints its child key once its body runs under the claim.
    let stdout = BufReader::new(worker.stdout.take().unwrap());
    let holding = tokio::task::spawn_blocking(move || {
        stdout
            .lines()
            .map_while(Result::ok)
            .find_map(|line| Some(line.split_once("HOLDING ")?.1.to_owned()))
    });
    let sent_downstream = tokio::time::timeout(Duration::from_secs(120), holding)
        .await
        .expect("the worker never claimed")
        .unwrap()
        .expect("the worker ended without claiming");
    worker.kill().expect("SIGKILL the worker");
    worker.wait().unwrap();

    let key = RecordKey::new("jobs", "job-1");
    let left = store
        .inspect(&key)
        .await
        .unwrap()
        .expect("the dead holder's claim");
    assert!(
        matches!(left.state, RecordState::InProgress | RecordState::Lapsed),
        "{left:?}"
    );
    assert_eq!(left.site.as_deref(), Some("worker::job"), "{left:?}");
    // Lapsed by this process's clock, as the next claim will judge it.
    let deadline = Instant::now() + LEASE + Duration::from_secs(60);
    while store.inspect(&key).await.unwrap().unwrap().state != RecordState::Lapsed {
        assert!(
            Instant::now() < deadline,
            "the dead holder's claim never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let idem = Idempotency::new(store);
    let asked = Mutex::new(Vec::new());
    let runs = Mutex::new(0);
    let call = || {
        idem.call("jobs", "job-1")
            .lease(Duration::from_secs(60))
            .reconcile(|| async {
                asked.lock().unwrap().push(idem::child_key("job"));
                Ok::<Option<String>, Error>(None)
            })
            .run(|| async {
                *runs.lock().unwrap() += 1;
                Ok::<_, Error>(format!("done by {}", std::process::id()))
            })
    };
    let mine = format!("done by {}", std::process::id());
    assert_eq!(call().await.unwrap(), mine);
    assert_eq!(
        *asked.lock().unwrap(),
        [Some(sent_downstream)],
        "the takeover asked the reconcile once, with the dead holder's child key"
    );
    assert_eq!(call().await.unwrap(), mine, "replayed");
    assert_eq!(*runs.lock().unwrap(), 1);
    assert_eq!(asked.lock().unwrap().len(), 1, "a replay is no takeover");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_holder_is_taken_over_by_another_process_on_dynoxide() {
    a_sigkilled_holder_is_taken_over(Emulator::Dynoxide).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_holder_is_taken_over_by_another_process_on_moto() {
    a_sigkilled_holder_is_taken_over(Emulator::Moto).await;
}

/// Not a test of its own: the worker process of the takeover tests (a
/// no-op unless `IDEM_DYNAMODB_TAKEOVER_WORKER` is set). Claims the key,
/// prints its child key and never finishes its body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let (url, table) = spec.split_once(' ').unwrap();
    let store = DynamoDbStore::new(dynamodb_server::client(url), table);
    let idem = Idempotency::new(store);
    let out: Result<String, Error> = idem
        .call("jobs", "job-1")
        .site(idem::call_site!("worker::job"))
        .lease(LEASE)
        .run(|| async {
            let child = idem::child_key("job").expect("a child key under the claim");
            println!("\nHOLDING {child}");
            std::future::pending::<()>().await;
            unreachable!()
        })
        .await;
    panic!("the body ended: {out:?}");
}
