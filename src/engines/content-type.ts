import { WASMagic } from 'wasmagic';

/** libmagic sees at most this much of the content; the rest never changes its answer in practice. */
export const SNIFF_BYTES = 1024 * 1024;

// The vendor's clients expect the vendor's names where libmagic has newer ones.
const VENDOR_NAMES: Record<string, string> = {
  'application/vnd.microsoft.portable-executable': 'application/x-msdownload',
  'application/x-dosexec': 'application/x-msdownload',
};

/** Media type detection with libmagic (compiled to WASM), from the first bytes of the content. */
export class ContentTypeDetector {
  private constructor(private readonly magic: WASMagic) {}

  static async create(): Promise<ContentTypeDetector> {
    return new ContentTypeDetector(await WASMagic.create());
  }

  detect(head: Buffer): string {
    const type = this.magic.detect(head).split(';')[0]?.trim() || 'application/octet-stream';
    return VENDOR_NAMES[type] ?? type;
  }
}
