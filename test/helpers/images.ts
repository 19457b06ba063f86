import { constants, deflateRawSync } from 'node:zlib';
import sharp from 'sharp';
import { crc32 } from './zip.js';

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32), so fixtures are the same each run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A photo-like JPEG of a town: sky, clouds, hills, houses with windows, trees and a road, laid
 * out at random (seeded), then softened and given sensor-like noise. No people: a neutral photo.
 * (Noise or gradients alone do not pass for photos: the model reads such textures as skin.)
 */
export async function photoLike(width: number, height: number, seed: number): Promise<Buffer> {
  const next = random(seed);
  const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)] as T;
  const horizon = height * (0.45 + next() * 0.15);
  const shapes: string[] = [];
  for (let i = 0; i < 5; i++) {
    const cx = next() * width;
    const cy = next() * horizon * 0.5;
    shapes.push(
      `<ellipse cx="${cx}" cy="${cy}" rx="${width * (0.06 + next() * 0.08)}" ry="${height * 0.03 + next() * 20}" fill="white" opacity="0.85" filter="url(#soft)"/>`,
    );
  }
  shapes.push(
    `<path d="M0 ${horizon} Q ${width * 0.25} ${horizon - height * 0.15} ${width * 0.5} ${horizon} T ${width} ${horizon} V ${height} H 0 Z" fill="${pick(['#5b8c3a', '#6f9a45', '#4d7a33'])}"/>`,
  );
  let x = next() * 40;
  while (x < width) {
    const w = width * (0.06 + next() * 0.08);
    const h = height * (0.12 + next() * 0.22);
    const top = horizon + height * 0.08 - h;
    shapes.push(
      `<rect x="${x}" y="${top}" width="${w}" height="${h}" fill="${pick(['#b8b2a7', '#9c6b4e', '#d8d0c0', '#7d8790', '#c9a27e'])}" stroke="#333" stroke-width="2"/>`,
      `<polygon points="${x - 6},${top} ${x + w / 2},${top - h * 0.3} ${x + w + 6},${top}" fill="${pick(['#7a2e22', '#444a52', '#5a3a2a'])}"/>`,
    );
    for (let wy = top + 12; wy < top + h - 24; wy += 28) {
      for (let wx = x + 8; wx < x + w - 18; wx += 24) {
        shapes.push(
          `<rect x="${wx}" y="${wy}" width="12" height="16" fill="${pick(['#2b3a4a', '#e8e2b0', '#3d5266'])}" stroke="#eee" stroke-width="1.5"/>`,
        );
      }
    }
    if (next() < 0.5) {
      const tx = x + w + 10;
      shapes.push(
        `<rect x="${tx}" y="${horizon + height * 0.02}" width="10" height="${height * 0.07}" fill="#5a3d22"/>`,
        `<circle cx="${tx + 5}" cy="${horizon}" r="${height * 0.05}" fill="${pick(['#2f6b2a', '#3c7d31', '#285a24'])}" filter="url(#soft)"/>`,
      );
    }
    x += w + 20 + next() * 60;
  }
  shapes.push(
    `<rect x="0" y="${horizon + height * 0.12}" width="${width}" height="${height * 0.12}" fill="#55585c"/>`,
    `<line x1="0" y1="${horizon + height * 0.18}" x2="${width}" y2="${horizon + height * 0.18}" stroke="#eee" stroke-width="4" stroke-dasharray="40 30"/>`,
  );
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
    <defs>
      <linearGradient id="sky" x1="0" y1="0" x2="0" y2="1">
        <stop offset="0" stop-color="${pick(['#3f7fd0', '#5a8fd6', '#6d9ccf'])}"/><stop offset="1" stop-color="#cfe3f5"/>
      </linearGradient>
      <filter id="soft"><feGaussianBlur stdDeviation="6"/></filter>
    </defs>
    <rect width="${width}" height="${height}" fill="url(#sky)"/>
    ${shapes.join('\n')}
  </svg>`;
  const { data, info } = await sharp(Buffer.from(svg))
    .blur(0.8)
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  for (let i = 0; i < data.length; i++) {
    data[i] = Math.max(0, Math.min(255, (data[i] ?? 0) + (next() - 0.5) * 14));
  }
  return sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } })
    .jpeg({ quality: 85 })
    .toBuffer();
}

/** A child's drawing: a house, a tree and a sun, in lines and flat colours on white (PNG). */
export function drawing(): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480">
    <rect width="640" height="480" fill="white"/>
    <circle cx="540" cy="90" r="50" fill="gold" stroke="orange" stroke-width="6"/>
    <rect x="160" y="220" width="220" height="180" fill="none" stroke="firebrick" stroke-width="8"/>
    <polygon points="140,225 270,110 400,225" fill="none" stroke="saddlebrown" stroke-width="8"/>
    <rect x="240" y="310" width="60" height="90" fill="none" stroke="navy" stroke-width="6"/>
    <rect x="440" y="300" width="24" height="100" fill="sienna"/>
    <circle cx="452" cy="270" r="55" fill="none" stroke="green" stroke-width="8"/>
    <line x1="0" y1="402" x2="640" y2="402" stroke="darkgreen" stroke-width="6"/>
  </svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/** A screenshot of a text editor window: title bar, sidebar, lines of text (PNG). */
export function screenshot(): Promise<Buffer> {
  const lines = Array.from(
    { length: 22 },
    (_, i) =>
      `<text x="230" y="${80 + i * 22}" font-family="sans-serif" font-size="15" fill="#222">` +
      `${i + 1}  const total = items.reduce((sum, item) =&gt; sum + item.price, 0); // line ${i + 1}</text>`,
  ).join('\n');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="1280" height="600">
    <rect width="1280" height="600" fill="#fdfdfd"/>
    <rect width="1280" height="36" fill="#dcdcdc"/>
    <circle cx="20" cy="18" r="7" fill="#ff5f56"/><circle cx="42" cy="18" r="7" fill="#ffbd2e"/>
    <circle cx="64" cy="18" r="7" fill="#27c93f"/>
    <text x="560" y="24" font-family="sans-serif" font-size="14" fill="#333">report.ts — Editor</text>
    <rect x="0" y="36" width="200" height="564" fill="#2d2f33"/>
    ${['src', 'engines', 'report.ts', 'README.md', 'package.json']
      .map(
        (name, i) =>
          `<text x="20" y="${70 + i * 24}" font-family="sans-serif" font-size="14" fill="#ddd">${name}</text>`,
      )
      .join('')}
    ${lines}
    <rect x="1100" y="550" width="150" height="34" rx="4" fill="#2f6fde"/>
    <text x="1140" y="572" font-family="sans-serif" font-size="14" fill="white">Save</text>
  </svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * A decompression bomb: a valid PNG of width x height black 8-bit grey pixels, about 1 KB of
 * file per MB of pixels. Built without holding the pixels: a block of zero rows is compressed
 * once with a full flush (byte-aligned, independent of what came before) and repeated.
 */
export function pngBomb(width: number, height: number): Buffer {
  const row = width + 1; // a filter byte, then the pixels
  const rowsPerBlock = Math.max(1, Math.floor((4 * 1024 * 1024) / row));
  const block = deflateRawSync(Buffer.alloc(row * rowsPerBlock), {
    finishFlush: constants.Z_FULL_FLUSH,
  });
  const blocks = Math.floor(height / rowsPerBlock);
  const tail = deflateRawSync(Buffer.alloc(row * (height - blocks * rowsPerBlock)));
  const adler = Buffer.alloc(4); // Adler-32 of zeros: a = 1, b = the length
  adler.writeUInt32BE((((row * height) % 65521) * 65536 + 1) >>> 0, 0);
  const idat = Buffer.concat([
    Buffer.from([0x78, 0x9c]),
    ...Array.from({ length: blocks }, () => block),
    tail,
    adler,
  ]);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.writeUInt8(8, 8); // bit depth
  header.writeUInt8(0, 9); // grey
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', idat),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}
