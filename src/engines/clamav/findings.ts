export type FindingsStyle = 'content' | 'av';

/** What content clamd could not fully examine becomes (ASSAY_UNEXAMINED): never a clean result. */
export type UnexaminedOutcome = 'finding' | 'error';

/**
 * Why clamd could not fully examine content, from its alert (AlertEncrypted, AlertExceedsMax and
 * MaxScanTime in the managed clamd.conf), or null for a detection of what it did examine.
 */
export function notFullyExamined(signature: string): string | null {
  const [heuristics, kind, third, detail] = signature.split('.', 4);
  if (heuristics !== 'Heuristics') return null;
  if (kind === 'Encrypted') return `it is encrypted (${signature})`;
  if (kind === 'Limits' && third === 'Exceeded') {
    return detail === 'MaxScanTime'
      ? `its scan took longer than the time limit (${signature})`
      : `it is over a limit of depth, file count or size (${signature})`;
  }
  return null;
}

const EICAR = /eicar/i;

/**
 * Maps a clamd signature name to an Assay finding. Every EICAR variant (ours, the official
 * `Win.Test.EICAR_HDB-1`, ...) becomes one stable name, so clients need not know which database hit.
 */
export function clamdSignatureToFinding(signature: string, style: FindingsStyle): string {
  if (style === 'av') {
    return EICAR.test(signature) ? 'av.eicar-test-signature' : `av.${signature.toLowerCase()}`;
  }
  if (EICAR.test(signature)) return 'content.malicious.eicar-test-signature';
  const name = signature
    .replace(/\.UNOFFICIAL$/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-');
  return `content.malicious.${trimDashesAndDots(name)}`;
}

/** Without leading and trailing `-` and `.`; a loop, as `/[-.]+$/` is quadratic on inner runs. */
function trimDashesAndDots(name: string): string {
  const trimmable = (char: string | undefined) => char === '-' || char === '.';
  let start = 0;
  let end = name.length;
  while (start < end && trimmable(name[start])) start++;
  while (end > start && trimmable(name[end - 1])) end--;
  return name.slice(start, end);
}
