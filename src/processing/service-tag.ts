import { createHash } from 'node:crypto';

/**
 * The signature set's tag: a digest of the signature set clamd scans with (the official
 * databases' version and the digest of every database loaded, Assay's own and the operator's
 * rules included), so it changes exactly when the signatures do and is the same on every process
 * and node serving the same set; Assay's own upgrades leave it alone. ICAP's `ISTag` (appliances
 * rescan what they scanned under another tag: quoted, 32 bytes in all, RFC 3507, 4.7), and what
 * a watched bucket's clean objects are scanned again by when it changes (`signatureSet`).
 */
export class ServiceTag {
  private last: string | null = null;
  /** The reading the last tag was made from: the same reading gives the same tag, unhashed. */
  private lastParts: readonly string[] | null = null;

  constructor(
    /** The changing parts of the engines' identity (EngineVersions.changing), null while unknown. */
    private readonly signatureParts: () => Promise<readonly string[] | null>,
  ) {}

  /** The tag now; the last one known while clamd cannot be asked, or a fixed one before any. */
  async current(): Promise<string> {
    const parts = await this.signatureParts().catch(() => null);
    if (parts === null) return this.last ?? '"assay-signatures-unknown"';
    if (parts === this.lastParts && this.last !== null) return this.last;
    this.lastParts = parts;
    // "clamd <engine>, daily <n> of <date>": the engine's own version is not the signature set.
    const signatures = parts.slice(0, 2).map((part) => part.replace(/^clamd [^,]*, /, ''));
    const digest = createHash('sha256').update(signatures.join('\n')).digest('base64url');
    this.last = `"S${digest.slice(0, 29)}"`;
    return this.last;
  }

  /** The set's digest unquoted; null while it was never known (nothing to compare with yet). */
  async signatureSet(): Promise<string | null> {
    const tag = await this.current();
    return tag.startsWith('"S') ? tag.slice(2, -1) : null;
  }
}
