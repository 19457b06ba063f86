// The media types the language engine reads, apart from the extractors (mammoth, unpdf), so the
// main thread can route content without loading them: only the engine's workers do.

export const PDF = 'application/pdf';
export const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
export const JSON_TYPE = 'application/json';
export const HTML = 'text/html';

/** Whether text can be extracted from content of this media type. */
export function isExtractable(contentType: string): boolean {
  return (
    contentType.startsWith('text/') ||
    contentType === JSON_TYPE ||
    contentType === PDF ||
    contentType === DOCX
  );
}
