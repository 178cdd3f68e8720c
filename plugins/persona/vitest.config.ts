import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/persona',
    include: ['tests/**/*.test.ts'],
  },
})
