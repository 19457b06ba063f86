/**
 * Makes a reused random buffer unique per file (clamd and Assay's verdict cache know content by
 * its hash) by writing `tags` (unsigned 32-bit each) into its last bytes. Not its first: small
 * integers at offset 0 look like the headers of binary formats, to libmagic and to clamd's own
 * type detection, and sent up to a third of the "random" heads down libmagic's full walk.
 */
export function tagContent(content: Buffer, ...tags: number[]): Buffer {
  let at = content.length - 4 * tags.length;
  if (at < 0) throw new Error(`${content.length} bytes cannot hold ${tags.length} tags`);
  for (const tag of tags) {
    content.writeUInt32LE(tag >>> 0, at);
    at += 4;
  }
  return content;
}
