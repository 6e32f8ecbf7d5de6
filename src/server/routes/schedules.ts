/** Recurring schedule routes, by name; a change answers once durable, with the schedule. */

import type { FastifyPluginAsync } from 'fastify';
import type {
  ScheduleBodyRecurring,
  ScheduleDeleteResponse,
  ScheduleListResponse,
  WireSchedule,
} from '../../protocol/wire.js';
import type { RouteGroupOptions } from '../context.js';
import { notFound } from '../errors.js';
import {
  scheduleDeleteSchema,
  scheduleGetSchema,
  scheduleListSchema,
  schedulePatchSchema,
  schedulePutSchema,
} from '../schemas/schedules.js';

type Named = { Params: { name: string } };

export const scheduleRoutes: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  app.get(
    '/schedules',
    { schema: scheduleListSchema },
    async (): Promise<ScheduleListResponse> => ({ schedules: await context.queue.listSchedules() }),
  );

  app.get<Named>('/schedules/:name', { schema: scheduleGetSchema }, async (request) => {
    const schedule = await context.queue.getSchedule(request.params.name);
    if (schedule === undefined) throw notFound(`no schedule named ${request.params.name}`);
    return schedule satisfies WireSchedule;
  });

  app.put<Named & { Body: ScheduleBodyRecurring }>(
    '/schedules/:name',
    { schema: schedulePutSchema },
    (request): Promise<WireSchedule> =>
      context.queue.putSchedule(request.params.name, request.body),
  );

  app.patch<Named & { Body: Partial<ScheduleBodyRecurring> }>(
    '/schedules/:name',
    { schema: schedulePatchSchema },
    async (request) => {
      const schedule = await context.queue.updateSchedule(request.params.name, request.body);
      if (schedule === undefined) throw notFound(`no schedule named ${request.params.name}`);
      return schedule satisfies WireSchedule;
    },
  );

  app.delete<Named>(
    '/schedules/:name',
    { schema: scheduleDeleteSchema },
    async (request): Promise<ScheduleDeleteResponse> => {
      if (!(await context.queue.deleteSchedule(request.params.name))) {
        throw notFound(`no schedule named ${request.params.name}`);
      }
      return { deleted: true };
    },
  );
};
