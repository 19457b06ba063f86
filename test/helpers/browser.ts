import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer, type Socket } from 'node:net';
import { after, before } from 'node:test';
import { type Browser, chromium } from 'playwright-core';

/**
 * The browser of Debian's `chromium` package (installed by `./setup.sh --test`), started directly:
 * the /usr/bin/chromium wrapper would add Google API keys, `--enable-remote-extensions` and Debian's
 * extensions, none of which a test wants.
 */
export const CHROMIUM_PATH = '/usr/lib/chromium/chromium';

/** Flags for a quiet, throwaway headless Chromium: no first-run, sync or update traffic. */
const QUIET_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // Chromium 156 still asks update.googleapis.com and accounts.google.com (ListAccounts) at start
  // despite the flags above; these send both to a loopback port where nothing listens.
  '--component-updater=url-source=http://127.0.0.1:9/',
  '--gaia-url=http://127.0.0.1:9/',
  // A page with a password field makes Chromium ask its autofill server about the form; some pages
  // make it ask Google for the time, or fetch optimization models and safe-browsing lists.
  '--disable-features=AutofillServerCommunication,NetworkTimeServiceQuerying,OptimizationGuideModelDownloading,OptimizationHintsFetching,OptimizationHints',
  '--safebrowsing-disable-auto-update',
  '--autofill-server-url=http://127.0.0.1:9/',
];

/** Chromium's component downloads (see useBrowser). */
const BROWSER_OWN = /^CONNECT redirector\.gvt1\.com:443 /;
/**
 * What a browser sends a proxy: CONNECT host:port, or a request for an absolute URL. Anything else
 * on the trap's port is not the browser's: another test's process polling a port it used to own
 * (`GET /health/ready`, seen in CI), now the trap's.
 */
const PROXY_REQUEST = /^(?:CONNECT \S+|[A-Z]+ [a-z][a-z0-9+.-]*:\/\/\S*) HTTP\//;

/**
 * One headless Chromium per test file (playwright gives it a fresh temporary profile). It can only
 * reach loopback: names do not resolve, and everything that is not loopback goes to a "proxy" here
 * that records the attempt and closes the connection (Chromium sends loopback direct by default).
 * Any such attempt fails the file, but for Chromium's own component downloads (redirector.gvt1.com),
 * which no flag of Chromium 156 stops on every page: they are the browser's, never a page's, and
 * are refused like the rest.
 */
export function useBrowser(): { readonly browser: Browser } {
  let browser: Browser | null = null;
  const offLoopback: string[] = [];
  const sockets = new Set<Socket>();
  const trap = createServer((socket) => {
    sockets.add(socket);
    socket.once('data', (chunk) => {
      const request = String(chunk).split('\r\n')[0] ?? '';
      if (PROXY_REQUEST.test(request) && !BROWSER_OWN.test(request)) offLoopback.push(request);
      socket.destroy();
    });
    socket.on('close', () => sockets.delete(socket));
  });
  before(async () => {
    if (!existsSync(CHROMIUM_PATH)) {
      throw new Error(`${CHROMIUM_PATH} is missing: run ./setup.sh --test (Debian's chromium)`);
    }
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
    const { port } = trap.address() as AddressInfo;
    browser = await chromium.launch({
      executablePath: CHROMIUM_PATH,
      args: [
        ...QUIET_ARGS,
        `--proxy-server=http://127.0.0.1:${port}`,
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
      ],
    });
  });
  after(async () => {
    await browser?.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => trap.close(() => resolve()));
    assert.deepEqual(offLoopback, [], 'the browser tried to reach beyond loopback');
  });
  return {
    get browser() {
      if (browser === null) throw new Error('the browser is not started yet');
      return browser;
    },
  };
}
