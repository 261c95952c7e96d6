//! The live page in a real browser: headless Chromium, driven through
//! chromedriver (WebDriver) by `fantoccini`, against a booted example OS
//! serving its page (`--ui`). It checks that every controller and type is
//! drawn, that an edit of `machine.yaml` reaches the page within two seconds,
//! and that a failing controller is marked, and saves a screenshot; and that
//! the page works under its content security policy, with its token in a
//! cookie and not in the address, and refuses a browser without the token.
//!
//! Chromium and chromedriver are Debian's (`apt-get install chromium
//! chromium-driver`, which `.ci/run` does); where they are missing the test
//! fails, or is skipped with `COSI_ALLOW_SKIP=1` outside CI
//! (`cosi::testing::server`). The screenshot is saved in the target
//! directory; `UPDATE_UI_SCREENSHOT=1` also saves it as `docs/ui.png`, the
//! README's picture.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cosi::runtime::BackoffOptions;
use example_os::{MACHINE_YAML, Options, Os, Timings};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const CHROMIUM: &[&str] = &["/usr/bin/chromium", "/usr/bin/chromium-browser"];
const CHROMEDRIVER: &[&str] = &["/usr/bin/chromedriver"];
const INSTALL: &str = "apt-get install chromium chromium-driver";

/// The issue's bound: an edit shows on the page within two seconds.
const EDIT_SHOWN_WITHIN: Duration = Duration::from_secs(2);
/// A bound against hangs for everything else.
const PATIENCE: Duration = Duration::from_secs(30);

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|path| path.is_file())
}

/// chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start(path: &Path) -> Driver {
        let port =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|free| free.local_addr()).expect("a free port").port();
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        Driver { child, port }
    }

    async fn ready(&self) {
        let started = Instant::now();
        while tokio::net::TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))).await.is_err() {
            assert!(started.elapsed() < PATIENCE, "chromedriver does not listen on port {}", self.port);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn browser(driver: &Driver, chromium: &Path, profile: &Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=2200,1150",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session")
}

/// Evaluates `script` in the page until `done` holds for its value, within `bound`; returns the value.
async fn until(page: &Client, what: &str, bound: Duration, script: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let value = page.execute(script, Vec::new()).await.expect("the script runs");
        if done(&value) {
            return value;
        }
        assert!(started.elapsed() < bound, "{what}: not within {bound:?}; last seen {value}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Clicks the element `css` selects. The page redraws the graph when it
/// changes, so an element found just before a redraw may be gone when
/// clicked: it is found again, within [`PATIENCE`].
async fn click(page: &Client, css: &str) {
    let started = Instant::now();
    loop {
        let clicked = match page.find(Locator::Css(css)).await {
            Ok(element) => element.click().await.map(drop),
            Err(error) => Err(error),
        };
        match clicked {
            Ok(()) => return,
            Err(error) => assert!(started.elapsed() < PATIENCE, "{css}: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn edit(sandbox: &Path, from: &str, to: &str) {
    let path = sandbox.join(MACHINE_YAML);
    let text = std::fs::read_to_string(&path).expect("machine.yaml");
    assert!(text.contains(from), "{from:?} is not in machine.yaml");
    std::fs::write(&path, text.replace(from, to)).expect("machine.yaml is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_shows_the_running_os() {
    let (Some(chromium), Some(chromedriver)) = (find(CHROMIUM), find(CHROMEDRIVER)) else {
        cosi::testing::server::missing("Chromium and chromedriver", INSTALL);
        return;
    };
    let driver = Driver::start(&chromedriver);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sandbox = dir.path().join("sandbox");
    let backoff = BackoffOptions {
        initial: Duration::from_millis(200),
        max: Duration::from_secs(1),
        ..BackoffOptions::default()
    };
    let options = Options::new(&sandbox)
        .timings(Timings::instant())
        .backoff(backoff)
        .ui(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    let os = Os::boot(options).await.expect("the OS boots");
    let url = os.ui_url().expect("the page is served").to_owned();
    let graph = example_os::controllers::graph().expect("the controllers register");

    driver.ready().await;
    let page = browser(&driver, &chromium, &dir.path().join("profile")).await;
    page.goto(&url).await.expect("the page opens");

    // Every controller and type is drawn, each controller with its state, each type with its count.
    until(
        &page,
        "the event stream is live",
        PATIENCE,
        "return document.getElementById('connection').className",
        |class| class == "live",
    )
    .await;
    let mut expected_types: Vec<String> = graph
        .controllers
        .iter()
        .flat_map(|controller| {
            let inputs = controller.inputs.iter().map(|input| input.r#type.clone());
            inputs.chain(controller.outputs.iter().map(|output| output.r#type.clone()))
        })
        .collect();
    expected_types.sort();
    expected_types.dedup();
    // Sensitive types (the machine configuration, the operator's specs, the
    // files under /etc) are drawn without a count: the page hides them.
    let sensitive: Vec<String> = example_os::resources::definitions()
        .into_iter()
        .filter(|definition| definition.sensitivity == cosi::resource::Sensitivity::Sensitive)
        .map(|definition| definition.r#type)
        .collect();
    let (hidden, expected_types): (Vec<String>, Vec<String>) =
        expected_types.into_iter().partition(|r#type| sensitive.contains(r#type));
    assert_eq!(hidden.len(), 3, "{hidden:?}");
    let mut expected_controllers: Vec<String> =
        graph.controllers.iter().map(|controller| controller.name.clone()).collect();
    expected_controllers.sort();
    let drawn = until(
        &page,
        "every controller drawn with its state",
        PATIENCE,
        "return [...document.querySelectorAll('g.node.controller[data-state]')].map(g => g.dataset.name).sort()",
        |names| names.as_array().is_some_and(|names| names.len() == expected_controllers.len()),
    )
    .await;
    assert_eq!(drawn, json!(expected_controllers));
    let drawn = page
        .execute(
            "return [...document.querySelectorAll('g.node.type[data-count]')].map(g => g.dataset.name).sort()",
            Vec::new(),
        )
        .await
        .expect("the script runs");
    assert_eq!(drawn, json!(expected_types));
    let uncounted = page
        .execute(
            "return [...document.querySelectorAll('g.node.type:not([data-count])')].map(g => g.dataset.name).sort()",
            Vec::new(),
        )
        .await
        .expect("the script runs");
    assert_eq!(uncounted, json!(hidden));

    // The hostname's resources, listed with its print columns; an edit shows within two seconds.
    click(&page, r#"g.node.type[data-name="HostnameStatuses.net.exampleos.dev"]"#).await;
    let hostname_cell = "const row = document.querySelector('#resources tr[data-id=\"hostname\"]'); \
                         return row ? row.cells[2].textContent : null";
    until(&page, "the hostname listed", PATIENCE, hostname_cell, |cell| cell == "demo-node").await;
    let edited = Instant::now();
    edit(&sandbox, "hostname: demo-node", "hostname: browser-node");
    until(&page, "the edited hostname shown", EDIT_SHOWN_WITHIN, hostname_cell, |cell| cell == "browser-node").await;
    println!("the edited hostname was on the page {:?} after the edit", edited.elapsed());

    // The walkthrough's bad sysctl: the controller is marked failing, its error one click away.
    edit(&sandbox, r#"vm.swappiness: "10" }"#, r#"vm.swappiness: "10", vm.bogus: "1" }"#);
    let failing = r#"g.node.controller[data-name="runtime.KernelParamSpecController"]"#;
    until(
        &page,
        "the sysctl controller marked failing",
        PATIENCE,
        &format!("return document.querySelector('{failing}').dataset.state"),
        |state| state == "failing",
    )
    .await;
    click(&page, failing).await;
    until(
        &page,
        "the last error in the panel",
        PATIENCE,
        "return document.getElementById('panel-content').textContent",
        |text| text.as_str().is_some_and(|text| text.contains("vm.bogus")),
    )
    .await;

    let png = page.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let saved = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui.png");
    std::fs::write(&saved, &png).expect("the screenshot is saved");
    println!("screenshot: {}", saved.display());
    if std::env::var_os("UPDATE_UI_SCREENSHOT").is_some() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/ui.png");
        std::fs::write(&docs, &png).expect("docs/ui.png is written");
    }

    // Fixed, it recovers.
    edit(&sandbox, r#", vm.bogus: "1""#, "");
    until(
        &page,
        "the sysctl controller running again",
        PATIENCE,
        &format!("return document.querySelector('{failing}').dataset.state"),
        |state| state == "running",
    )
    .await;

    // The page's token: gone from the address once the page opened, kept in
    // a cookie no script reads, which a reload sends again. Without it, the
    // page is refused.
    let token = url.split_once("?token=").map(|(_, token)| token.to_owned()).expect("the URL carries the token");
    let address = page.current_url().await.expect("the address");
    assert!(address.query().is_none(), "the token left the address bar: {address}");
    let script_cookies = page.execute("return document.cookie", Vec::new()).await.expect("the script runs");
    assert!(!script_cookies.to_string().contains(&token), "HttpOnly: {script_cookies}");
    page.refresh().await.expect("a reload");
    until(
        &page,
        "the event stream is live again after a reload",
        PATIENCE,
        "return document.getElementById('connection').className",
        |class| class == "live",
    )
    .await;
    page.delete_all_cookies().await.expect("the cookies go");
    page.goto(address.as_str()).await.expect("the page without its cookie");
    let refused = page.source().await.expect("what the browser shows");
    assert!(refused.contains("?token=") && !refused.contains("<svg"), "{refused}");

    page.close().await.expect("the browser closes");
    os.shutdown().await.expect("a clean shutdown");
}
