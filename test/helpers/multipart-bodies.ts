/** Multipart bodies for the reader's tests (boundary `XYZ`), and a socket's way of handing them over. */

/** Feeds `body` in the given piece sizes (cycled), as a socket would hand it over. */
export async function* pieces(body: Buffer, sizes: number[]): AsyncGenerator<Buffer> {
  let offset = 0;
  for (let i = 0; offset < body.length; i++) {
    const size = sizes[i % sizes.length] as number;
    yield body.subarray(offset, offset + size);
    offset += size;
  }
}

export const part = (headers: string, content: string) =>
  `--XYZ\r\n${headers}\r\n\r\n${content}\r\n`;
export const field = (name: string, value: string) =>
  part(`Content-Disposition: form-data; name="${name}"`, value);
export const file = (content: string, name = 'file', filename = 'a.bin') =>
  part(`Content-Disposition: form-data; name="${name}"; filename="${filename}"`, content);
export const END = '--XYZ--\r\n';
