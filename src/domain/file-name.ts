/** The most of a file's name kept (UTF-8 bytes): what common file systems allow. */
export const FILE_NAME_BYTES = 255;

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
/** A surrogate without its pair: no character, and not UTF-8. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A name a client gave its file as kept: control characters (which PostgreSQL's text cannot
 * always hold, and no name needs) become spaces, lone surrogates U+FFFD, and it is cut to
 * FILE_NAME_BYTES of UTF-8 at a character's end; null when nothing is left.
 */
export function keptFileName(raw: string | null | undefined): string | null {
  if (raw === null || raw === undefined) return null;
  // Bounded before any work: what is kept is far shorter than this.
  const name = raw
    .slice(0, FILE_NAME_BYTES * 4)
    .replace(LONE_SURROGATE, '\ufffd')
    .replace(CONTROLS, ' ')
    .trim();
  if (name === '') return null;
  if (Buffer.byteLength(name) <= FILE_NAME_BYTES) return name;
  let kept = '';
  let bytes = 0;
  for (const char of name) {
    const size = Buffer.byteLength(char);
    if (bytes + size > FILE_NAME_BYTES) break;
    kept += char;
    bytes += size;
  }
  return kept.trimEnd() || null;
}

/** A fetched URL's file name: its path's last segment, decoded (null when it has none). */
export function fileNameOfUrl(url: string): string | null {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return null;
  }
  const segment = path.slice(path.lastIndexOf('/') + 1);
  try {
    return keptFileName(decodeURIComponent(segment));
  } catch {
    return keptFileName(segment); // not valid percent-encoding: kept as written
  }
}
