/**
 * Harmless content that every engine flags, so integrators can test each category without real
 * malware. EICAR is assembled at run time: a file holding it would be quarantined by antivirus.
 */

const EICAR_PARTS = [
  'X5O!P%@AP[4\\PZX54(P^)7CC)7}$',
  ['EICAR', 'STANDARD', 'ANTIVIRUS', 'TEST', 'FILE!'].join('-'),
  '$H+H*',
];

/** The 68-byte EICAR anti-malware test string. */
export function eicar(): string {
  return EICAR_PARTS.join('');
}

/** Flagged as `content.malicious.local-test-file` (by Assay's ClamAV database). */
export const LOCAL_TEST_FILE_MARKER = '38DCC0C9-7FB6-4D0D-9C37-288A380C6BB9';

/** Flagged as `content.en.language.nsfw.0` (by the language engine). */
export const LANGUAGE_TEST_MARKER = 'C681D880-8EB3-4D8F-B2E6-FE25EB415C47';

/**
 * Flagged as `content.image.nsfw.nudity` (by the image engine): the size and SHA-256 of Assay's
 * own harmless sample image, static/samples/image.jpg.
 */
export const IMAGE_TEST_SAMPLE_BYTES = 1671;
export const IMAGE_TEST_SAMPLE_SHA256 =
  '94ffa9ecc05798b79c63ce77c6d5f50daa8683e695541d2b268bd69f132e2b9d';
