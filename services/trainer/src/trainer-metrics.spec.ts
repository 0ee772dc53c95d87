import { ServiceMetrics } from '#libs/service-metrics';
import { STEP_PHASES, type StepPhase } from './step-phases.js';
import { TrainerMetrics } from './trainer-metrics.js';

describe('trainer metrics', () => {
  test('trainer metrics - step phases of a tenth of a millisecond fall in buckets that tell them apart', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    const trainer = new TrainerMetrics(metrics);
    const phases = Object.fromEntries(STEP_PHASES.map((p) => [p, 0])) as Record<StepPhase, number>;
    trainer.stepPhases('j', { ...phases, decode: 0.09, train: 0.8 });
    const text = await metrics.render();
    const bucket = (phase: string, le: string) =>
      `tributary_trainer_step_phase_seconds_bucket{le="${le}",job="j",phase="${phase}"}`;
    expect(text).toContain(`${bucket('decode', '0.00005')} 0`);
    expect(text).toContain(`${bucket('decode', '0.0001')} 1`);
    expect(text).toContain(`${bucket('train', '0.0005')} 0`);
    expect(text).toContain(`${bucket('train', '0.001')} 1`);
    expect(text).toContain(`${bucket('idle', '0.00001')} 1`);
  });
});
