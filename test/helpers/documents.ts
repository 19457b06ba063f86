import { type Deflated, zipArchive } from './zip.js';

/**
 * A one-page PDF showing `lines` of text. The font is a Type0 font whose codes are Unicode
 * (Identity-H with an identity ToUnicode map), so any BMP text, full-width letters included,
 * is extracted as written.
 */
export function pdfWithText(lines: string[]): Buffer {
  const hex = (text: string) =>
    Array.from(text, (char) => (char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')).join('');
  const content = lines
    .map((line, index) => `BT /F1 12 Tf 72 ${720 - index * 16} Td <${hex(line)}> Tj ET`)
    .join('\n');
  const cmap = [
    '/CIDInit /ProcSet findresource begin 12 dict begin begincmap',
    '/CMapName /Identity-Unicode def /CMapType 2 def',
    '1 begincodespacerange <0000> <FFFF> endcodespacerange',
    '1 beginbfrange <0000> <FFFF> <0000> endbfrange',
    'endcmap CMapName currentdict /CMap defineresource pop end end',
  ].join('\n');
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${Buffer.byteLength(content)} >>\nstream\n${content}\nendstream`,
    '<< /Type /Font /Subtype /Type0 /BaseFont /Plain /Encoding /Identity-H /DescendantFonts [6 0 R] /ToUnicode 7 0 R >>',
    '<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Plain /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 600 >>',
    `<< /Length ${Buffer.byteLength(cmap)} >>\nstream\n${cmap}\nendstream`,
  ];
  return pdfOf(objects);
}

/** A PDF of these objects (numbered from 1, the first the catalog), with its cross-reference table. */
function pdfOf(objects: string[]): Buffer {
  let pdf = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((object, index) => {
    offsets.push(Buffer.byteLength(pdf));
    pdf += `${index + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = Buffer.byteLength(pdf);
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  pdf += offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`).join('');
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, 'utf8');
}

/**
 * A PDF whose page tree claims `count` pages. `loop`: two page-tree nodes each the other's kid, no
 * page at all. `shared`: levels of nodes each listing the one below twice, down to one empty page
 * (2^levels leaves from a few dozen objects: the page tree's "billion laughs"), `count` a power of 2.
 */
export function pdfPageTree(kind: 'loop' | 'shared', count: number): Buffer {
  if (kind === 'loop') {
    return pdfOf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      `<< /Type /Pages /Kids [3 0 R] /Count ${count} >>`,
      `<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count ${count} >>`,
    ]);
  }
  const levels = Math.log2(count);
  if (!Number.isInteger(levels)) throw new Error('a shared page tree has 2^n pages');
  return pdfOf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    ...Array.from({ length: levels }, (_, level) => {
      const kid = level + 3;
      return `<< /Type /Pages /Kids [${kid} 0 R ${kid} 0 R] /Count ${2 ** (levels - level)} >>`;
    }),
    `<< /Type /Page /Parent ${levels + 1} 0 R /MediaBox [0 0 612 792] >>`,
  ]);
}

function xmlEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const WORD_NAMESPACE = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main';

/**
 * A Word document (DOCX) whose word/document.xml is `document`: compressed (DEFLATE) if given as
 * bytes, as it is if compressed beforehand (a bomb too large to hold unpacked).
 */
export function docxWithDocumentXml(document: Buffer | Deflated): Buffer {
  const xml = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>';
  const types =
    `${xml}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
    '<Default Extension="xml" ContentType="application/xml"/>' +
    '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>' +
    '</Types>';
  const rels =
    `${xml}<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>' +
    '</Relationships>';
  return zipArchive([
    { name: '[Content_Types].xml', data: Buffer.from(types) },
    { name: '_rels/.rels', data: Buffer.from(rels) },
    Buffer.isBuffer(document)
      ? { name: 'word/document.xml', data: document, deflate: true }
      : { name: 'word/document.xml', deflated: document },
  ]);
}

/** The opening and closing of a word/document.xml around its paragraphs' XML. */
export const DOCUMENT_XML = {
  head: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="${WORD_NAMESPACE}"><w:body>`,
  tail: '</w:body></w:document>',
};

/** One paragraph of a word/document.xml. */
export function paragraphXml(text: string): string {
  return `<w:p><w:r><w:t xml:space="preserve">${xmlEscape(text)}</w:t></w:r></w:p>`;
}

/** A minimal Word document (DOCX) with one paragraph per entry of `paragraphs`. */
export function docxWithText(paragraphs: string[]): Buffer {
  return docxWithDocumentXml(
    Buffer.from(`${DOCUMENT_XML.head}${paragraphs.map(paragraphXml).join('')}${DOCUMENT_XML.tail}`),
  );
}
