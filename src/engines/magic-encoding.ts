/**
 * Whether libmagic would find that a head is not text in any encoding it knows, decided here in
 * one short scan, so that the reduced tier can run without libmagic's own encoding checks
 * (MAGIC_NO_CHECK_ENCODING | MAGIC_NO_CHECK_TEXT): for binary content they cost more than its
 * tests (about 150 us of a 64 KB head, of which a whole EBCDIC conversion).
 *
 * What libmagic 5.48 (wasmagic's build) does, from its src/encoding.c, funcs.c and ascmagic.c:
 * file_encoding() calls a head text if it looks like ASCII, UTF-8 (with or without a BOM), UTF-32
 * or UTF-16 with a BOM, ISO-8859, extended ASCII, or EBCDIC translated to ASCII or ISO-8859; each
 * check fails at the first byte its class table refuses, and all of them look at most at the first
 * FILE_ENCODING_MAX bytes. file_buffer() runs it on the head, file_ascmagic() again on the head
 * less its trailing NULs. When it answers "binary" both times, the only uses of its answer are
 * `looks_text` = 0 for the soft magic and the CSV check (as when the check is off) and no text
 * classification (file_ascmagic answers nothing): the answer is the same with both checks off.
 *
 * A head is proved binary here by a byte that no ASCII, ISO-8859 or extended-ASCII text holds
 * (class F below) and a byte whose EBCDIC translation no ASCII or ISO-8859 text holds (class F or
 * X), both before the trailing NULs and within FILE_ENCODING_MAX, and no UTF-16 or UTF-32 BOM.
 * UTF-8 (with a BOM too) is refused by the first byte: an ASCII-range control byte is never text
 * there either. test/engines/magic-tiers.test.ts compares the answers with libmagic's own checks.
 */

/** libmagic's FILE_ENCODING_MAX: how far its encoding checks look. */
const ENCODING_MAX = 64 * 1024;

/** text_chars[] of encoding.c: F never in text, T ASCII, I ISO-8859, X extended ASCII. */
const F = 0;
const T = 1;
const I = 2;
const X = 3;
const TEXT_CHARS = new Uint8Array(256);
for (let byte = 0; byte < 256; byte++) {
  TEXT_CHARS[byte] = byte >= 0xa0 ? I : byte >= 0x80 ? (byte === 0x85 ? T : X) : T;
}
// BEL BS HT LF VT FF CR (7-13), ESC and SUB (26, 27) are text; the other controls and DEL are not.
for (const byte of [0, 1, 2, 3, 4, 5, 6, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]) {
  TEXT_CHARS[byte] = F;
}
for (const byte of [28, 29, 30, 31, 127]) TEXT_CHARS[byte] = F;

/** ebcdic_to_ascii[] of encoding.c (the table its from_ebcdic() translates with). */
// biome-ignore format: a table of 16 bytes a row, as in encoding.c
const EBCDIC_TO_ASCII = Uint8Array.from([
  0, 1, 2, 3, 156, 9, 134, 127, 151, 141, 142, 11, 12, 13, 14, 15,
  16, 17, 18, 19, 157, 133, 8, 135, 24, 25, 146, 143, 28, 29, 30, 31,
  128, 129, 130, 131, 132, 10, 23, 27, 136, 137, 138, 139, 140, 5, 6, 7,
  144, 145, 22, 147, 148, 149, 150, 4, 152, 153, 154, 155, 20, 21, 158, 26,
  32, 160, 161, 162, 163, 164, 165, 166, 167, 168, 213, 46, 60, 40, 43, 124,
  38, 169, 170, 171, 172, 173, 174, 175, 176, 177, 33, 36, 42, 41, 59, 126,
  45, 47, 178, 179, 180, 181, 182, 183, 184, 185, 203, 44, 37, 95, 62, 63,
  186, 187, 188, 189, 190, 191, 192, 193, 194, 96, 58, 35, 64, 39, 61, 34,
  195, 97, 98, 99, 100, 101, 102, 103, 104, 105, 196, 197, 198, 199, 200, 201,
  202, 106, 107, 108, 109, 110, 111, 112, 113, 114, 94, 204, 205, 206, 207, 208,
  209, 229, 115, 116, 117, 118, 119, 120, 121, 122, 210, 211, 212, 91, 214, 215,
  216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 93, 230, 231,
  123, 65, 66, 67, 68, 69, 70, 71, 72, 73, 232, 233, 234, 235, 236, 237,
  125, 74, 75, 76, 77, 78, 79, 80, 81, 82, 238, 239, 240, 241, 242, 243,
  92, 159, 83, 84, 85, 86, 87, 88, 89, 90, 244, 245, 246, 247, 248, 249,
  48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 250, 251, 252, 253, 254, 255,
]);

/** Per byte: 1 never in text as it is, 2 never in text once translated from EBCDIC. */
const NOT_TEXT = new Uint8Array(256);
for (let byte = 0; byte < 256; byte++) {
  const translated = TEXT_CHARS[EBCDIC_TO_ASCII[byte] as number];
  NOT_TEXT[byte] =
    (TEXT_CHARS[byte] === F ? 1 : 0) | (translated === F || translated === X ? 2 : 0);
}

/** Whether libmagic's encoding checks would call `head` binary (see above); false if unsure. */
export function looksBinaryToLibmagic(head: Uint8Array): boolean {
  const b0 = head[0];
  const b1 = head[1];
  // A UTF-16 or UTF-32 BOM: libmagic reads on as such text.
  if ((b0 === 0xff && b1 === 0xfe) || (b0 === 0xfe && b1 === 0xff)) return false;
  if (b0 === 0 && b1 === 0 && head[2] === 0xfe && head[3] === 0xff) return false;
  let end = head.length;
  // trim_nuls() of ascmagic.c: the second check does not see trailing NULs.
  while (end > 1 && head[end - 1] === 0) end--;
  end = Math.min(end, ENCODING_MAX);
  let seen = 0;
  // Linear, and short for binary content: random bytes show both kinds within a few dozen.
  for (let i = 0; i < end; i++) {
    seen |= NOT_TEXT[head[i] as number] as number;
    if (seen === 3) return true;
  }
  return false;
}

/** The flags of a libmagic instance that only sees heads looksBinaryToLibmagic proved binary. */
export const MAGIC_NO_CHECK_ENCODING = 0x200000;
export const MAGIC_NO_CHECK_TEXT = 0x020000;
