import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { ConsoleAccess } from '../../src/accounts/console-access.js';
import { loadConfig } from '../../src/config.js';
import type { Store } from '../../src/store/store.js';
import { layoutProblems } from './layout.js';

/** Where the console tests put their screenshots (a CI artifact; not committed). */
export const SCREENSHOT_DIR = join(process.cwd(), 'test-artifacts', 'console');

export interface ConsoleLogin {
  email: string;
  password: string;
}

/** Adds a console user to `accountId` straight in the store (as `assay admin user add` does). */
export async function addConsoleUser(
  store: Store,
  accountId: string,
  options: { operator?: boolean; email?: string } = {},
): Promise<ConsoleLogin> {
  const email = options.email ?? `user-${randomBytes(4).toString('hex')}@example.com`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  await new ConsoleAccess(store, loadConfig({}).console).addUser({
    accountId,
    email,
    password,
    operator: options.operator ?? false,
  });
  return { email, password };
}

/** A signed-in HTTP client of the console: the session cookie, and the CSRF token of its forms. */
export interface ConsoleClient {
  cookie: string;
  csrf: string;
  get(path: string): Promise<Response>;
  /** Posts a form; the CSRF token is added unless `csrf` is given (null: none at all). */
  post(
    path: string,
    fields?: Record<string, string | string[]>,
    csrf?: string | null,
  ): Promise<Response>;
}

/** One sign-in attempt's answer, redirects not followed (`headers`: a cookie, an address...). */
export function signInAnswer(
  baseUrl: string,
  email: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${baseUrl}/console/sign-in`, {
    method: 'POST',
    headers,
    body: new URLSearchParams({ email, password }),
    redirect: 'manual',
  });
}

/** Signs in over HTTP as a browser would (no redirects followed: the test sees each answer). */
export async function signIn(baseUrl: string, login: ConsoleLogin): Promise<ConsoleClient> {
  const answer = await fetch(`${baseUrl}/console/sign-in`, {
    method: 'POST',
    body: new URLSearchParams({ email: login.email, password: login.password }),
    redirect: 'manual',
  });
  assert.equal(answer.status, 303, 'signed in');
  const cookie = (answer.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  assert.match(cookie, /^assay_console=.+/);
  const get = (path: string) =>
    fetch(`${baseUrl}${path}`, { headers: { cookie }, redirect: 'manual' });
  const overview = await (await get('/console')).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(overview)?.[1] ?? '';
  assert.notEqual(csrf, '', 'the page carries a CSRF token');
  return {
    cookie,
    csrf,
    get,
    post(path, fields = {}, token) {
      const form = new URLSearchParams();
      for (const [name, value] of Object.entries(fields)) {
        for (const one of [value].flat()) form.append(name, one);
      }
      const given = token === undefined ? csrf : token;
      if (given !== null) form.set('csrf', given);
      return fetch(`${baseUrl}${path}`, {
        method: 'POST',
        headers: { cookie },
        body: form,
        redirect: 'manual',
      });
    },
  };
}

/** The text of an HTML page's `<main>`, tags removed: what a test reads of a page. */
export function mainText(page: string): string {
  const main = /<main[^>]*>([\s\S]*)<\/main>/.exec(page)?.[1] ?? page;
  return main
    .replace(/<[^>]+>/g, ' ')
    .replace(/&amp;/g, '&')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/\s+/g, ' ')
    .trim();
}

/** Signs in through the browser's sign-in form. */
export async function signInWithBrowser(page: Page, baseUrl: string, login: ConsoleLogin) {
  await page.goto(`${baseUrl}/console/sign-in`);
  await page.getByLabel('E-mail address').fill(login.email);
  await page.getByLabel('Password').fill(login.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${baseUrl}/console`);
}

const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 800 } };

const axeSource = readFileSync(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
);

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown }>;
}

/**
 * Screenshots the page at phone and desktop widths into SCREENSHOT_DIR (`<name>-phone.png`,
 * `<name>-desktop.png`) and answers its layout's problems at each (layoutProblems: wider than the
 * viewport, cut off or spilling out of a box; a table may scroll in its wrapper on a phone only),
 * each line starting with the page's name and the width.
 */
export async function layoutAtWidths(page: Page, name: string): Promise<string[]> {
  const problems: string[] = [];
  await eachWidth(page, name, async () => {}, problems);
  return problems;
}

/** Screenshots and the layout at each width (any problem fails), and axe-core: no serious or critical issue. */
export async function checkPage(page: Page, name: string): Promise<void> {
  await eachWidth(page, name, async (width) => {
    // axe runs in the page's own world; the console's CSP allows only its own scripts, so it is
    // added through the browser's protocol (addScriptTag would be refused).
    await page.evaluate(axeSource);
    const violations = (await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } })
        .axe;
      return (await axe.run()).violations;
    })) as AxeViolation[];
    const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(
      serious.map((v) => `${v.id}: ${v.help} (${JSON.stringify(v.nodes.map((n) => n.target))})`),
      [],
      `${name} at ${width} width`,
    );
  });
}

/** Screenshots and layout at each width, then `check`; layout problems go to `problems` if given, else fail. */
async function eachWidth(
  page: Page,
  name: string,
  check: (width: string) => Promise<void>,
  problems?: string[],
): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  for (const [width, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    // For a person to look at, not asserted: a loaded machine (files run at once) may take longer
    // than Playwright's 30 s to paint a full page.
    await page.screenshot({
      path: join(SCREENSHOT_DIR, `${name}-${width}.png`),
      fullPage: true,
      timeout: 120_000,
    });
    const found = await layoutProblems(page, width === 'phone');
    if (problems === undefined) {
      assert.deepEqual(found, [], `${name} at ${size.width} px: what cannot be seen or reached`);
    } else {
      problems.push(...found.map((problem) => `${name} at ${size.width} px: ${problem}`));
    }
    await check(width);
  }
}

/** A fresh browser context (its own cookies) and page. */
export async function newPage(browser: Browser): Promise<Page> {
  const context = await browser.newContext();
  return context.newPage();
}
