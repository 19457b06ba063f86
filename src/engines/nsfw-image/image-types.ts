// Apart from the engine, so the service routes content without loading sharp (libvips) until the
// first image.

/** The media types sharp decodes, as Assay's type detector (libmagic) names them. */
export const IMAGE_TYPES = new Set([
  'image/jpeg',
  'image/png',
  'image/webp',
  'image/gif',
  'image/tiff',
  'image/avif',
  'image/heif',
  'image/heic',
]);
