export type FindingsStyle = 'content' | 'av';

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
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '');
  return `content.malicious.${name}`;
}
