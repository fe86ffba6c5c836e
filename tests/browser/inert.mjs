// inert.mjs: stored client bytes opened in a browser on the API's origin stay inert.
//
//   node inert.mjs BASE_URL TOKEN URL...
//
// BASE_URL is the origin to attack (the stack's authenticating proxy: a request
// without a token goes on with the site's own); TOKEN goes into that origin's
// sessionStorage where the viewer keeps it ("dstream.token"). Each URL (a stream
// read under BASE_URL whose body is a script-bearing document) is then opened in
// the same tab, as a victim would open a link. The documents' scripts, if they run,
// read the token from sessionStorage and create a marker stream with it through a
// synchronous request (done before the page's load event): the caller looks for the
// markers. Before that, the same script run by DevTools on the origin creates
// "control" (the harness can see a script that runs). Prints one line per URL
// ("# opened URL: STATUS TYPE") and "inert: PASS" or "inert: FAIL ...".
import { launch } from "./lib.mjs";

const [base, token, ...urls] = process.argv.slice(2);
if (!base || !token || urls.length === 0) {
    console.error("usage: node inert.mjs BASE_URL TOKEN URL...");
    process.exit(2);
}

const browser = await launch();
let failed = false;
try {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${base}/web/`);
    await page.evaluate((t) => sessionStorage.setItem("dstream.token", t), token);
    // The control: what each document's script does, run on the origin itself.
    await page.evaluate(() => {
        const x = new XMLHttpRequest();
        x.open("PUT", "/v1/stream/xss-marker/control", false);
        x.setRequestHeader("Authorization", "Bearer " + sessionStorage.getItem("dstream.token"));
        x.setRequestHeader("Content-Type", "text/plain");
        x.send();
        if (x.status !== 201) throw new Error(`control: HTTP ${x.status}`);
    });
    for (const url of urls) {
        const res = await page.goto(url, { waitUntil: "load" });
        console.log(`# opened ${url}: ${res.status()} ${res.headers()["content-type"]}`);
        if (res.status() !== 200) throw new Error(`${url}: HTTP ${res.status()}`);
        // Back on the origin's own page: the token is still there for the next one.
        await page.goto(`${base}/web/`);
        const t = await page.evaluate(() => sessionStorage.getItem("dstream.token"));
        if (t !== token) throw new Error("the token left sessionStorage");
    }
    console.log(`inert: PASS (${urls.length} documents opened)`);
} catch (e) {
    failed = true;
    console.log(`inert: FAIL ${e.message}`);
} finally {
    await browser.close();
}
process.exit(failed ? 1 : 0);
