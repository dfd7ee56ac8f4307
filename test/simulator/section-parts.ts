/**
 * The other arrays of a section (spec 2.5): text_entries, inputs (I1 null, I2 text, I3 with any
 * answer shape) and media_galleries (null, or with images that are null or objects).
 */
import type { Rng } from './prng.js';
import type { TextMix } from './questions.js';
import { freeText, label, sentence } from './text.js';

const INPUT_TYPES = ['number', 'date', 'signature', 'checkbox', 'address', 'text'] as const;
const VIEW_TYPES = ['grid-view', 'grid-view', 'list-view', 'carousel', 'Slideshow V2'] as const;
const MEASUREMENTS = ['cm', 'kg', '°C', 'minutes', 'm²'] as const;

function repeat<T>(count: number, make: () => T): T[] {
  const out: T[] = [];
  for (let i = 0; i < count; i++) out.push(make());
  return out;
}

/** `text_entries[]`: description and answer, both nullable. */
export function textEntries(rng: Rng, mix: TextMix): Array<Record<string, unknown>> {
  return repeat(rng.pick([0, 0, 1, 2, 3]), () => ({
    description: rng.orNull(0.2, () => label(rng)),
    answer: rng.orNull(0.15, () => freeText(rng, mix.tricky, mix.long)),
  }));
}

/** I3 answers: null, a string, an object, or an array of string|null. */
function measuredAnswer(rng: Rng, mix: TextMix): unknown {
  return rng.pick([
    () => null,
    () => freeText(rng, mix.tricky),
    () => String(rng.int(0, 500)),
    () => ({ street: sentence(rng, 2, 3), number: rng.int(1, 200), geo: { lat: 52.37, lng: 4.89 } }),
    () => ({}),
    () => [sentence(rng, 1, 2), null, freeText(rng, mix.tricky)],
    () => [],
  ])();
}

function input(rng: Rng, mix: TextMix): Record<string, unknown> | null {
  const roll = rng.next();
  if (roll < 0.12) return null;
  if (roll < 0.45) {
    return {
      input_type: 'text',
      description: rng.orNull(0.2, () => label(rng)),
      answer: rng.orNull(0.2, () => freeText(rng, mix.tricky, mix.long)),
    };
  }
  const item: Record<string, unknown> = {
    input_type: rng.orNull(0.15, () => rng.pick(INPUT_TYPES)),
    description: rng.orNull(0.2, () => label(rng)),
    answer: measuredAnswer(rng, mix),
    measurement: rng.orNull(0.5, () => rng.pick(MEASUREMENTS)),
  };
  if (rng.chance(0.1)) item.unit_system = rng.pick(['metric', 'imperial']);
  return item;
}

/** `inputs[]`: a mix of I1, I2 and I3. */
export function inputs(rng: Rng, mix: TextMix): Array<Record<string, unknown> | null> {
  return repeat(rng.pick([0, 1, 2, 3]), () => input(rng, mix));
}

function image(rng: Rng, jobId: number): Record<string, unknown> | null {
  if (rng.chance(0.1)) return null;
  const name = rng.hex(16);
  const item: Record<string, unknown> = {
    url: `https://media.example.com/jobs/${jobId}/${name}.jpg`,
    thumb_url: `https://media.example.com/jobs/${jobId}/${name}_thumb.jpg`,
    caption: rng.orNull(0.4, () => freeText(rng, 0.2)),
  };
  if (rng.chance(0.1)) item.exif = { width: 4032, height: 3024, taken_at: '2024-05-01T09:30:00Z' };
  return item;
}

function gallery(rng: Rng, jobId: number): Record<string, unknown> | null {
  if (rng.chance(0.2)) return null;
  return {
    description: rng.orNull(0.3, () => label(rng)),
    view_type: rng.pick(VIEW_TYPES),
    images: repeat(rng.pick([0, 1, 2, 3, 4]), () => image(rng, jobId)),
  };
}

/** `media_galleries[]`: null items, empty galleries, galleries of images (null or objects). */
export function mediaGalleries(rng: Rng, jobId: number): Array<Record<string, unknown> | null> {
  return repeat(rng.pick([0, 0, 1, 2]), () => gallery(rng, jobId));
}
