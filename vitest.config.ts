import { defineConfig } from 'vitest/config'
import projects from './vitest.workspace.ts'

// vitest 4 ignores a workspace file on its own; the list lives there and is used here.
export default defineConfig({
  test: {
    projects,
  },
})
