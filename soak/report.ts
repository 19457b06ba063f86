/**
 * The soak's report folder: samples.json (every sample), summary.md (the figures and the checks)
 * and chart.svg (RSS per process, latency p50/p99 per 10 s window, queue depth, over time).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RequestRecord } from './load.js';
import type { Sample } from './sampler.js';

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/** p50 and p99 per kind of request, and how many of each status. */
export function latencyByKind(requests: RequestRecord[]): string[] {
  const kinds = [...new Set(requests.map((r) => r.kind))].sort();
  return kinds.map((kind) => {
    const of = requests.filter((r) => r.kind === kind);
    const statuses = new Map<number, number>();
    for (const r of of) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const counts = [...statuses].map(([status, n]) => `${status}: ${n}`).join(', ');
    const ms = of.map((r) => r.ms);
    return `| ${kind} | ${of.length} | ${percentile(ms, 50).toFixed(0)} | ${percentile(ms, 99).toFixed(0)} | ${counts} |`;
  });
}

interface Series {
  label: string;
  points: Array<[number, number]>;
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2'];

/** One panel of the chart: lines over time, with its axis labels. */
function panel(
  title: string,
  unit: string,
  series: Series[],
  top: number,
  t0: number,
  t1: number,
  marks: number[] = [],
) {
  const width = 900;
  const height = 200;
  const left = 60;
  const max = Math.max(1, ...series.flatMap((s) => s.points.map(([, v]) => v))) * 1.1;
  const x = (t: number) => left + ((t - t0) / Math.max(1, t1 - t0)) * (width - left - 20);
  const y = (v: number) => top + height - (v / max) * height;
  const parts = [
    `<text x="${left}" y="${top - 8}" font-size="13" font-weight="bold">${title}</text>`,
    `<line x1="${left}" y1="${top + height}" x2="${width - 20}" y2="${top + height}" stroke="#999"/>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${top + height}" stroke="#999"/>`,
    `<text x="4" y="${top + 10}" font-size="11">${max.toFixed(0)} ${unit}</text>`,
    `<text x="4" y="${top + height}" font-size="11">0</text>`,
    `<text x="${width - 80}" y="${top + height + 14}" font-size="11">${((t1 - t0) / 60_000).toFixed(1)} min</text>`,
  ];
  // The chaos's faults, where they began.
  for (const at of marks) {
    parts.push(
      `<line x1="${x(at).toFixed(1)}" y1="${top}" x2="${x(at).toFixed(1)}" y2="${top + height}" stroke="#d62728" stroke-dasharray="4 3" opacity="0.6"/>`,
    );
  }
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const path = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="1.5" points="${path}"/>`);
    parts.push(
      `<text x="${left + 10 + i * 130}" y="${top + height + 28}" font-size="11" fill="${colour}">${s.label}</text>`,
    );
  });
  return parts.join('\n');
}

export function chartSvg(
  samples: Sample[],
  requests: RequestRecord[],
  marks: number[] = [],
): string {
  const t0 = samples[0]?.at ?? 0;
  const t1 = samples[samples.length - 1]?.at ?? t0 + 1;
  const names = [...new Set(samples.flatMap((s) => s.processes.map((p) => p.name)))];
  const rss: Series[] = names.map((name) => ({
    label: name,
    points: samples.map((s) => [s.at, s.processes.find((p) => p.name === name)?.rssMb ?? 0]),
  }));
  const windows: Array<[number, number[]]> = [];
  for (let start = t0; start < t1; start += 10_000) {
    const ms = requests.filter((r) => r.at >= start && r.at < start + 10_000).map((r) => r.ms);
    if (ms.length > 0) windows.push([start + 5000, ms]);
  }
  const latency: Series[] = [
    { label: 'p50', points: windows.map(([t, ms]) => [t, percentile(ms, 50)]) },
    { label: 'p99', points: windows.map(([t, ms]) => [t, percentile(ms, 99)]) },
  ];
  const queue: Series[] = [
    { label: 'jobs due', points: samples.map((s) => [s.at, s.jobsDue]) },
    { label: 'callbacks pending', points: samples.map((s) => [s.at, s.callbacksPending]) },
    { label: 'spool files', points: samples.map((s) => [s.at, s.spoolFiles]) },
  ];
  return [
    '<svg xmlns="http://www.w3.org/2000/svg" width="900" height="840" font-family="sans-serif">',
    '<rect width="100%" height="100%" fill="white"/>',
    panel('RSS per process (dashed: a fault of the chaos began)', 'MB', rss, 30, t0, t1, marks),
    panel('Request latency, every kind, per 10 s', 'ms', latency, 300, t0, t1, marks),
    panel('Queue depth', '', queue, 570, t0, t1, marks),
    '</svg>',
  ].join('\n');
}

export function writeReport(
  dir: string,
  samples: Sample[],
  requests: RequestRecord[],
  summary: string,
  marks: number[] = [],
): void {
  writeFileSync(join(dir, 'samples.json'), JSON.stringify(samples, null, 1));
  writeFileSync(join(dir, 'chart.svg'), chartSvg(samples, requests, marks));
  writeFileSync(join(dir, 'summary.md'), summary);
}
