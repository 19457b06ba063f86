import type { Page } from 'playwright-core';

/**
 * What a reader of the page at this width cannot see or reach, found in the browser's own layout:
 * - the page wider than the viewport (the whole page scrolls sideways);
 * - a box that cuts its content off (overflow hidden or clip, sideways or below);
 * - a box that scrolls sideways: allowed on a phone (`phone`: a wide table in its own wrapper),
 *   never on a desktop;
 * - text or a control (link, button, input, select) that spills out of a box it is in (a long
 *   word or URL over its neighbour's column, a button past its cell), or out of the viewport.
 * Visually hidden on purpose (the skip link, a phone's table headings) is left out.
 * Answers one line per problem, empty when there is none.
 */
export async function layoutProblems(page: Page, phone: boolean): Promise<string[]> {
  return (await page.evaluate(`(${IN_PAGE})(${phone})`)) as string[];
}

// Plain JavaScript text, run in the page (a TypeScript function's source, as the test runner
// compiles it, may call helpers that exist only in Node).
const IN_PAGE = `(phone) => {
  const problems = [];
  const root = document.documentElement;
  const viewport = root.clientWidth;
  const named = (element) => {
    let text = element.tagName.toLowerCase();
    if (element.id) text += '#' + element.id;
    for (const name of element.classList) text += '.' + name;
    const content = (element.textContent || '').trim().replace(/\\s+/g, ' ');
    return content === '' ? text : text + ' "' + content.slice(0, 60) + '"';
  };
  if (root.scrollWidth > viewport) {
    problems.push('the page is ' + root.scrollWidth + ' px wide in a ' + viewport + ' px viewport');
  }
  const hiddenOnPurpose = (element) => {
    for (let at = element; at !== null && at !== root; at = at.parentElement) {
      const s = getComputedStyle(at);
      if (at.classList.contains('skip') || s.clipPath !== 'none' || s.display === 'none' ||
        s.visibility === 'hidden') return true;
    }
    return false;
  };
  const scrolls = (overflow) => overflow === 'auto' || overflow === 'scroll';

  for (const element of document.body.querySelectorAll('*')) {
    const { overflowX, overflowY } = getComputedStyle(element);
    if ((overflowX === 'visible' && overflowY === 'visible') || hiddenOnPurpose(element)) continue;
    // A text field's value scrolls in it by nature (the caret moves through it).
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(element.tagName)) continue;
    if (!scrolls(overflowY) && overflowY !== 'visible' &&
      element.scrollHeight > element.clientHeight + 1) {
      problems.push(named(element) + ' cuts off its content below (' + element.scrollHeight +
        ' px in ' + element.clientHeight + ' px)');
    }
    if (overflowX === 'visible' || element.scrollWidth <= element.clientWidth + 1) continue;
    const sizes = element.scrollWidth + ' px in ' + element.clientWidth + ' px';
    if (!scrolls(overflowX)) problems.push(named(element) + ' cuts off its content (' + sizes + ')');
    else if (!phone) problems.push(named(element) + ' scrolls sideways (' + sizes + ')');
  }

  // Each rectangle inside every box around it, up to one that scrolls (reachable by scrolling,
  // and judged above), else inside the viewport.
  const checkRects = (start, rects, what) => {
    rects = rects.filter((rect) => rect.width > 0 && rect.height > 0);
    for (let at = start; at !== null && at !== root; at = at.parentElement) {
      const s = getComputedStyle(at);
      if (scrolls(s.overflowX)) return;
      if (s.display === 'inline' || s.display === 'contents') continue;
      const box = at.getBoundingClientRect();
      for (const rect of rects) {
        if (rect.left < box.left - 1 || rect.right > box.right + 1) {
          problems.push(what + ' spills out of ' + named(at).slice(0, 80) + ' (' +
            Math.round(rect.left) + '..' + Math.round(rect.right) + ' px in ' +
            Math.round(box.left) + '..' + Math.round(box.right) + ' px)');
          return;
        }
      }
    }
    for (const rect of rects) {
      if (rect.left < -1 || rect.right > viewport + 1) {
        problems.push(what + ' is outside the ' + viewport + ' px viewport');
        return;
      }
    }
  };

  for (const control of document.body.querySelectorAll('a, button, input, select, textarea, summary')) {
    if (control.type === 'hidden' || hiddenOnPurpose(control)) continue;
    checkRects(control.parentElement, [...control.getClientRects()], named(control));
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
    const text = (node.nodeValue || '').trim();
    const parent = node.parentElement;
    if (text === '' || parent === null || hiddenOnPurpose(parent)) continue;
    if (['SCRIPT', 'STYLE', 'TITLE', 'OPTION'].includes(parent.tagName)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    checkRects(parent, [...range.getClientRects()], 'the text "' + text.slice(0, 60) + '"');
  }
  return [...new Set(problems)];
}`;
