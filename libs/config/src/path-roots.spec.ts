import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  PathOutsideRootsError,
  confineDataPaths,
  confineOutputPath,
  readConfig,
  PATH_ROOTS_CONFIG,
} from '#libs/config';

describe('path roots', () => {
  let dir: string;
  let data: string;
  let out: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'path-roots-'));
    data = join(dir, 'data');
    out = join(dir, 'out');
    mkdirSync(join(data, 'set'), { recursive: true });
    mkdirSync(out);
    writeFileSync(join(data, 'set', 'train-0.recordio'), 'x');
    writeFileSync(join(dir, 'secret.txt'), 'root:x:0:0');
    symlinkSync(join(dir, 'secret.txt'), join(data, 'escape.recordio'));
    symlinkSync(dir, join(out, 'up'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const refusal = async (run: () => Promise<unknown>) => {
    const err = await run().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PathOutsideRootsError);
    expect((err as Error).message).not.toContain('root:x');
    return err as PathOutsideRootsError;
  };

  it('path roots - paths and patterns inside the roots are accepted, relative ones against the working directory', async () => {
    await confineDataPaths('train', ['set/train-*.recordio', join(data, 'set', 'train-0.recordio')], [data], data);
    await expect(confineOutputPath('new/model', [out], out)).resolves.toBe(join(out, 'new', 'model'));
  });

  it('path roots - "..", an absolute path outside, and a link out of the root are refused naming the field and the roots', async () => {
    const dots = await refusal(() => confineDataPaths('train', ['set/*.recordio', '../secret.txt'], [data], data));
    expect(dots.message).toBe(`dataset.train[1]: "../secret.txt" is outside TRIBUTARY_DATA_ROOT (${data})`);
    const absolute = await refusal(() => confineDataPaths('eval', ['/etc/passwd'], [data]));
    expect(absolute.field).toBe('dataset.eval[0]');
    const link = await refusal(() => confineDataPaths('train', [join(data, 'escape.recordio')], [data]));
    expect(link.field).toBe('dataset.train[0]');
    const glob = await refusal(() => confineDataPaths('train', ['/etc/*.conf'], [data]));
    expect(glob.message).toContain('"/etc/*.conf"');
  });

  it('path roots - an output that does not exist yet under a linked directory is judged by where the link leads', async () => {
    const err = await refusal(() => confineOutputPath(join(out, 'up', 'not-yet', 'model'), [out]));
    expect(err.message).toContain(
      `output: "${join(out, 'up', 'not-yet', 'model')}" is outside TRIBUTARY_OUTPUT_ROOT (${out})`,
    );
    await refusal(() => confineOutputPath('/tmp/../etc/cron.d/x', [out]));
  });

  it('path roots - the variables take ":"-separated lists, relative entries against the working directory', () => {
    expect(
      readConfig(PATH_ROOTS_CONFIG, { TRIBUTARY_DATA_ROOT: `${data}:/srv/data`, TRIBUTARY_OUTPUT_ROOT: 'out' }),
    ).toEqual({
      dataRoots: [data, '/srv/data'],
      outputRoots: [join(process.cwd(), 'out')],
    });
    expect(readConfig(PATH_ROOTS_CONFIG, {})).toEqual({
      dataRoots: [join(process.cwd(), 'data'), '/usr/share/datasets'],
      outputRoots: [join(process.cwd(), 'out')],
    });
    expect(() => readConfig(PATH_ROOTS_CONFIG, { TRIBUTARY_DATA_ROOT: `${data}::x` })).toThrow('has an empty entry');
  });
});
