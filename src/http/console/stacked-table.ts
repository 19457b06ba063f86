import { html, SafeHtml } from './html.js';

export interface Column {
  title: string;
  /** Right-aligned (on a desktop). */
  numeric?: boolean;
  /**
   * Free text that may hold long words (an error, a URL, a file name, a host): wraps anywhere, so
   * the table fits the page; at least a readable width on a desktop.
   */
  wrap?: boolean;
}

/** One cell's content; '' leaves it empty (left out of a phone's card). */
export type Cell = SafeHtml | string;

/**
 * A table on a desktop; on a phone each row becomes a card of "title: value" lines, so nothing
 * scrolls sideways (CSS `.stack`). The titles come from `data-label`; roles are written out
 * because some browsers drop a table's semantics once its cells are no longer laid out as one.
 */
export function stackedTable(
  label: string,
  columns: readonly Column[],
  rows: ReadonlyArray<readonly Cell[]>,
  options: {
    /** false: a card's lines have no titles (a time, then what happened). */
    titled?: boolean;
    /** A class for a row (e.g. `stale`), by its index. */
    rowClass?: (index: number) => string;
  } = {},
): SafeHtml {
  const titled = options.titled ?? true;
  const numeric = (index: number) => columns[index]?.numeric === true;
  const wrap = (index: number) => columns[index]?.wrap === true;
  const classes = (names: ReadonlyArray<string | false>) => {
    const list = names.filter((name) => name !== false).join(' ');
    return list === '' ? '' : html` class="${list}"`;
  };
  return html`<div class="table stack${titled ? '' : ' unlabelled'}" role="region" aria-label="${label}" tabindex="0"><table role="table">
<thead role="rowgroup"><tr role="row">${columns.map((column, index) => html`<th scope="col" role="columnheader"${classes([numeric(index) && 'num'])}>${column.title}</th>`)}</tr></thead>
<tbody role="rowgroup">${rows.map(
    (cells, row) =>
      html`<tr role="row"${classes([options.rowClass?.(row) || false])}>${cells.map(
        (cell, index) =>
          html`<td role="cell" data-label="${columns[index]?.title ?? ''}"${classes([numeric(index) && 'num', wrap(index) && 'wrap', cell === '' && 'empty'])}><span class="value">${cell}</span></td>`,
      )}</tr>`,
  )}</tbody></table></div>`;
}

/**
 * A URL that may also wrap after its separators (`/`, `?`, `&`): it breaks into readable pieces,
 * never a letter at a time, and copies whole.
 */
export function breakableUrl(url: string): SafeHtml {
  let out = '';
  let piece = '';
  for (const char of url) {
    piece += char;
    if (char === '/' || char === '?' || char === '&') {
      out += `${html`${piece}`.text}<wbr>`;
      piece = '';
    }
  }
  return new SafeHtml(out + html`${piece}`.text);
}
