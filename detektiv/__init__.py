"""detektiv where evaluations already run: an extension of Inspect AI (issue 76).

    inspect eval detektiv/hallucinations --model openai/gpt-4o-mini -T data=halueval-qa
    inspect score LOG.eval --scorer detektiv/examination

Installed with the `inspect` extra (`pip install 'detektiv[inspect]'`), Inspect finds it by
the `inspect_ai` entry point (`detektiv._registry`) and names what it registers after this
package: the scorer `detektiv/examination` (`detektiv.scorer`), the task
`detektiv/hallucinations` (`detektiv.task`) and the metrics `detektiv/held_share` and
`detektiv/contradicted_share`. Nothing here is imported by detektiv itself: without the extra,
Inspect is never loaded.
"""
