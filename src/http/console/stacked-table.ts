import { html, type SafeHtml } from './html.js';
import { scrollingTable } from './layout.js';

export interface Column {
  label: string;
  /** Right-aligned figures. */
  numeric?: boolean;
}

/**
 * A table that becomes one block per row on a phone, each cell under its column's name (the
 * `data-label` the stylesheet shows): wide rows stay readable without scrolling sideways. The
 * first cell of a row names it (a row header).
 */
export function stackedTable(
  label: string,
  columns: readonly Column[],
  rows: ReadonlyArray<readonly SafeHtml[]>,
  rowClass: (index: number) => string = () => '',
): SafeHtml {
  const head = columns.map(
    (column) =>
      html`<th scope="col"${column.numeric ? html` class="num"` : ''}>${column.label}</th>`,
  );
  const body = rows.map((cells, index) => {
    const className = rowClass(index);
    return html`<tr${className === '' ? '' : html` class="${className}"`}>${cells.map((cell, i) => {
      const column = columns[i] ?? { label: '' };
      const numeric = column.numeric ? html` class="num"` : '';
      // One element per cell: on a phone the cell is a grid of its label and this.
      return i === 0
        ? html`<th scope="row" data-label="${column.label}"><div>${cell}</div></th>`
        : html`<td data-label="${column.label}"${numeric}><div>${cell}</div></td>`;
    })}</tr>`;
  });
  return scrollingTable(
    label,
    html`<table class="stacked"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`,
  );
}
