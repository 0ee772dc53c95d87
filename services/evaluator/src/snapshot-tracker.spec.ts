import fc from 'fast-check';
import { MalformedMessageError, encodeJson } from '#libs/messaging';
import { SnapshotTracker, parseSnapshotNotice } from './snapshot-tracker.js';

const SUBJECT = 'tributary.jobs.j1.snapshots';

describe('snapshot tracker', () => {
  it('snapshot tracker - a version is complete once every shard announced it', () => {
    const tracker = new SnapshotTracker<string>(2);
    tracker.add(0, 10, 'a');
    expect(tracker.newestComplete()).toBeUndefined();
    tracker.add(0, 20, 'b');
    tracker.add(1, 10, 'c');
    expect(tracker.newestComplete()).toBe(10);
    tracker.add(1, 20, 'd');
    expect(tracker.newestComplete()).toBe(20);
    expect(tracker.take(20).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(tracker.pendingVersions()).toEqual([]);
    expect(tracker.add(0, 10, 'e')).toBe('stale');
    expect(tracker.latestVersion).toBe(20);
  });

  it('snapshot tracker - duplicate notices count once and newer incomplete versions stay pending', () => {
    const tracker = new SnapshotTracker<number>(3);
    for (const shard of [0, 0, 1, 2, 2]) tracker.add(shard, 5, shard);
    tracker.add(0, 6, 99);
    expect(tracker.newestComplete()).toBe(5);
    expect(tracker.take(5)).toHaveLength(5);
    expect(tracker.pendingVersions()).toEqual([6]);
    expect(tracker.newestComplete()).toBeUndefined();
  });

  it('snapshot tracker - newestComplete is the largest fully announced version', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.tuple(fc.nat(3), fc.nat(20)), { maxLength: 60 }),
        (shards, notices) => {
          const tracker = new SnapshotTracker(shards);
          const seen = new Map<number, Set<number>>();
          for (const [shard, version] of notices) {
            if (shard >= shards) continue;
            tracker.add(shard, version);
            seen.set(version, (seen.get(version) ?? new Set()).add(shard));
          }
          const complete = [...seen].filter(([, s]) => s.size === shards).map(([v]) => v);
          expect(tracker.newestComplete()).toBe(complete.length === 0 ? undefined : Math.max(...complete));
        },
      ),
    );
  });

  it('snapshot tracker - notices are parsed strictly', () => {
    expect(parseSnapshotNotice(SUBJECT, encodeJson({ jobId: 'j1', shard: 1, version: 40, at: 'x' }), 'j1', 2)).toEqual({
      jobId: 'j1',
      shard: 1,
      version: 40,
      at: 'x',
    });
    const bad = [
      new TextEncoder().encode('not json'),
      encodeJson([1, 2]),
      encodeJson({ jobId: 'other', shard: 0, version: 1 }),
      encodeJson({ jobId: 'j1', shard: 2, version: 1 }),
      encodeJson({ jobId: 'j1', shard: 0, version: -1 }),
      encodeJson({ jobId: 'j1', shard: 0.5, version: 1 }),
      encodeJson({ jobId: 'j1', shard: 0 }),
    ];
    for (const data of bad) expect(() => parseSnapshotNotice(SUBJECT, data, 'j1', 2)).toThrow(MalformedMessageError);
  });
});
