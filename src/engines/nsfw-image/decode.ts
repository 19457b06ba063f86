import sharp, { type Metadata } from 'sharp';

// libvips's cache of operations (50 MB by default) never hits here: every image is new.
sharp.cache(false);

/** The model's input: a square of this many pixels a side, RGB. */
export const MODEL_INPUT_SIZE = 224;

export interface DecodedImage {
  /** MODEL_INPUT_SIZE² RGB pixels, row by row. */
  pixels: Uint8Array;
  width: number;
  height: number;
  format: string;
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Decodes an image (JPEG, PNG, WebP, GIF's first frame, TIFF, AVIF/HEIF) and scales it to the
 * model's input, as nsfwjs does (stretched, not cropped). Images of more than `maxPixels` are
 * refused from their header, before any pixel is decoded: a small file can declare billions.
 * sharp decodes on libuv's thread pool, so the event loop stays free. A damaged image is an error:
 * sharp fails on decoder warnings too (a truncated JPEG), since half an image is not examined.
 */
export async function decodeForModel(content: Buffer, maxPixels: number): Promise<DecodedImage> {
  const options = { limitInputPixels: maxPixels, failOn: 'warning' as const };
  let metadata: Metadata;
  try {
    // The header alone: no pixel limit yet, so that a bomb gets the clear message below.
    metadata = await sharp(content, { limitInputPixels: false }).metadata();
  } catch (error) {
    throw new Error(`cannot read the image: ${reason(error)}`);
  }
  const { width, height, format } = metadata;
  if (!width || !height) throw new Error('cannot read the image: it declares no size');
  if (width * height > maxPixels) {
    throw new Error(
      `the image has ${width} x ${height} pixels, more than the ${maxPixels} examined`,
    );
  }
  try {
    const { data, info } = await sharp(content, options)
      .flatten({ background: '#ffffff' }) // transparent drawings are seen on white
      .resize(MODEL_INPUT_SIZE, MODEL_INPUT_SIZE, { fit: 'fill' })
      .toColourspace('srgb')
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3 || data.length !== MODEL_INPUT_SIZE * MODEL_INPUT_SIZE * 3) {
      throw new Error(`unexpected decoded layout (${info.width}x${info.height}x${info.channels})`);
    }
    return { pixels: data, width, height, format };
  } catch (error) {
    throw new Error(`cannot decode the ${format} image: ${reason(error)}`);
  }
}
