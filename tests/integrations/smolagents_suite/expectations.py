"""Which of smolagents' executor tests are expected to fail against codeward, and why.

Every one is a deliberate difference, not a fault: the test asserts smolagents' own wording or
bookkeeping, smolagents' semantics where CPython's differ, or something codeward refuses on
purpose. A key names a test as pytest does inside the file; a key ending in "*" takes every test whose
name starts with the rest (a class's tests, some of a parametrized test's cases). Each expected failure is strict: a test that starts passing fails the
suite, so that this list is shortened.
"""

from __future__ import annotations

import importlib.util

import pytest

COUNTER = "asserts smolagents' operation counter in the state (_operations_count), which codeward does not keep; its other assertions pass"
PATCHED_LIMIT = "sets smolagents' own limit by patching its module (MAX_OPERATIONS, MAX_WHILE_ITERATIONS), which codeward never reads"
MESSAGE = "asserts smolagents' own error text; codeward raises the Python error CPython raises, with CPython's message"
TIMEOUT_TEXT = "asserts smolagents' timeout message; codeward stops the code at the limit with its own message"
REFUSAL_TEXT = "codeward refuses this attack too, with its own message; the test asserts smolagents' refusal text"
STATEMENT_VALUE = "expects the value of the last statement run inside an if or a for as the block's value; Python, and codeward, give one only for a final expression"
OWN_OBJECTS = "reads an object of the code's own (class, instance, function, generator) on the host; codeward hands values out as data, such objects only as their text"
NOT_CPYTHON = "expects what CPython does not do (smolagents' own semantics); codeward gives CPython's result"
UNDERSCORE = "reads a name or attribute starting with '_' (a dunder, self._x), which codeward's policy refuses"
TOOL_NAME = "offers a tool named after a builtin or starting with '_' (str, __import__), which codeward refuses"
NO_EVAL = "offers eval/exec/compile as tools; codeward never lets code call them"
REBIND = "expects code that rebinds a builtin it was given as a tool (print = '3') to be refused; codeward lets code rebind it, as Python does"
INSTALLED = "expects the executor to refuse authorized modules that are not installed; codeward refuses the import when the code runs it"
WHOLE_MODULE = "authorizes builtins or os explicitly and expects smolagents' list of dangerous functions refused; codeward gives an authorized module whole (the worker's confinement is then the wall: os.popen fails there)"
INTERNAL = "tests a smolagents internal helper, not code run by an executor"

#: How each kind of expected failure shows: a test failing any other way is a failure of the suite.
#: (`pytest.fail.Exception` is "DID NOT RAISE"; InterpreterError is the adapter's form of codeward's errors.)
FAILS_WITH: dict[str, tuple[str, ...]] = {
    COUNTER: ("AssertionError", "KeyError"),
    PATCHED_LIMIT: ("Failed", "AssertionError"),
    MESSAGE: ("AssertionError",),
    TIMEOUT_TEXT: ("AssertionError",),
    REFUSAL_TEXT: ("AssertionError",),
    STATEMENT_VALUE: ("AssertionError",),
    OWN_OBJECTS: ("AssertionError", "AttributeError", "InterpreterError"),
    NOT_CPYTHON: ("AssertionError", "InterpreterError"),
    UNDERSCORE: ("AssertionError", "InterpreterError"),
    TOOL_NAME: ("ValueError", "InterpreterError"),
    NO_EVAL: ("InterpreterError",),
    REBIND: ("Failed",),
    INSTALLED: ("Failed",),
    WHOLE_MODULE: ("Failed",),
}

XFAIL: dict[str, str] = {
    # TestEvaluatePythonCode
    "TestEvaluatePythonCode::test_evaluate_assign": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_constant": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_dict": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_expression": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_f_string": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_f_string_with_format": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_f_string_with_complex_format": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_list": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_name": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_subscript": COUNTER,
    "TestEvaluatePythonCode::test_evaluate_binop": COUNTER,
    "TestEvaluatePythonCode::test_operations_count": COUNTER,
    "TestEvaluatePythonCode::test_max_operations": PATCHED_LIMIT,
    "TestEvaluatePythonCode::test_while": PATCHED_LIMIT,
    "TestEvaluatePythonCode::test_evaluate_call": MESSAGE,
    "TestEvaluatePythonCode::test_evaluate_call_starred_kwargs_errors[*": MESSAGE,
    "TestEvaluatePythonCode::test_adding_int_to_list_raises_error": MESSAGE,
    "TestEvaluatePythonCode::test_error_highlights_correct_line_of_code": MESSAGE,
    "TestEvaluatePythonCode::test_close_matches_subscript": MESSAGE,
    "TestEvaluatePythonCode::test_evaluate_delete[x = 5*": MESSAGE,
    "TestEvaluatePythonCode::test_evaluate_delete[x = {*": MESSAGE,
    "TestEvaluatePythonCode::test_evaluate_delete[del x*": MESSAGE,
    "TestEvaluatePythonCode::test_evaluate_if": STATEMENT_VALUE,
    "TestEvaluatePythonCode::test_evaluate_for": STATEMENT_VALUE,
    "TestEvaluatePythonCode::test_string_indexing": STATEMENT_VALUE,
    "TestEvaluatePythonCode::test_boolops": STATEMENT_VALUE,
    "TestEvaluatePythonCode::test_tuple_target_in_iterator": STATEMENT_VALUE,
    "TestEvaluatePythonCode::test_evaluate_class_def": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_evaluate_class_def_with_assign_attribute_target": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_evaluate_class_def_with_ann_assign_name": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_evaluate_class_def_with_ann_assign_attribute": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_evaluate_class_def_with_ann_assign_subscript": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_evaluate_class_def_with_enum": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_generatorexp": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_generatorexp_with_infinite_sequence": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_nonsimple_augassign": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_function_def_recovers_source_code": OWN_OBJECTS,
    "TestEvaluatePythonCode::test_variable_args": NOT_CPYTHON,
    "TestEvaluatePythonCode::test_exceptions": NOT_CPYTHON,
    "TestEvaluatePythonCode::test_tuple_id": NOT_CPYTHON,
    "TestEvaluatePythonCode::test_non_standard_comparisons": UNDERSCORE,
    "TestEvaluatePythonCode::test_call_int": TOOL_NAME,
    "TestEvaluatePythonCode::test_dangerous_builtins_are_callable_if_explicitly_added": NO_EVAL,
    "TestEvaluatePythonCode::test_assignment_cannot_overwrite_tool": REBIND,
    # TestTimeout
    "TestTimeout::test_evaluate_python_code_with_timeout_raises": TIMEOUT_TEXT,
    "TestTimeout::test_custom_timeout_value": TIMEOUT_TEXT,
    "TestTimeout::test_local_executor_custom_timeout": TIMEOUT_TEXT,
    # TestLocalPythonExecutor
    "TestLocalPythonExecutor::test_additional_authorized_imports_are_installed[additional_authorized_imports5-True]": INSTALLED,
    "TestLocalPythonExecutor::test_additional_authorized_imports_are_installed[additional_authorized_imports6-True]": INSTALLED,
    "TestLocalPythonExecutor::test_additional_authorized_imports_are_installed[additional_authorized_imports7-True]": INSTALLED,
    "TestLocalPythonExecutor::test_state_name": UNDERSCORE,
    "TestLocalPythonExecutor::test_evaluate_assign_error": MESSAGE,
    "TestLocalPythonExecutor::test_function_def_recovers_source_code": OWN_OBJECTS,
    # TestLocalPythonExecutorSecurity: every attack is refused, but in codeward's words
    "TestLocalPythonExecutorSecurity::test_vulnerability_import[additional_authorized_imports0-expected_error0]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins[additional_authorized_imports0-expected_error0]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_safe_functions[additional_authorized_imports0-expected_error0]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_dangerous_functions[additional_authorized_imports0-additional_tools0-expected_error0]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_dangerous_functions[additional_authorized_imports1-additional_tools1-expected_error1]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_dangerous_functions[additional_authorized_imports0-additional_tools0-expected_error0]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_dangerous_functions[additional_authorized_imports1-additional_tools1-expected_error1]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[builtins.compile]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[builtins.eval]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[builtins.exec]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[builtins.globals]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[builtins.locals]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[builtins.__import__]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[os.popen]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[os.system]": WHOLE_MODULE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_for_all_dangerous_functions[posix.system]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_sys[additional_authorized_imports0-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_sys[additional_authorized_imports1-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_sys_for_all_dangerous_modules[*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_importlib[additional_authorized_imports0-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_submodules[import queue*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_submodules[import random*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_submodules[import doctest*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_submodules[import asyncio*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_submodules[import warnings*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_submodules_through_indirect_attribute_access[*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_sys[additional_authorized_imports0-additional_tools0-expected_error0]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_sys[additional_authorized_imports1-additional_tools1-expected_error1]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_sys[additional_authorized_imports2-additional_tools2-expected_error2]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_sys[additional_authorized_imports3-additional_tools3-expected_error3]": TOOL_NAME,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_sys[additional_authorized_imports4-additional_tools4-None]": TOOL_NAME,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_traceback[additional_authorized_imports0-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_traceback[additional_authorized_imports1-*": TOOL_NAME,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_class_catch_warnings[additional_authorized_imports0-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_class_catch_warnings[additional_authorized_imports1-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_class_catch_warnings[additional_authorized_imports2-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_class_catch_warnings[additional_authorized_imports3-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_builtins_via_class_catch_warnings[additional_authorized_imports4-*": TOOL_NAME,
    "TestLocalPythonExecutorSecurity::test_vulnerability_load_module_via_builtin_importer[*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_class_via_subclasses": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_access[*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_indirect_access": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_call['string'.__dir__()-additional_allowed_dunder_methods0-__dir__]": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_call['string'.__dir__()-additional_allowed_dunder_methods1-None]": UNDERSCORE,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_call[code2-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_call[code3-*": REFUSAL_TEXT,
    "TestLocalPythonExecutorSecurity::test_vulnerability_via_dunder_call[code4-*": UNDERSCORE,
}

SKIP: dict[str, str] = {
    "TestEvaluateBoolop::*": INTERNAL + " (evaluate_boolop)",
    "TestEvaluateDelete::*": INTERNAL + " (evaluate_delete)",
    "TestEvaluateCondition::*": INTERNAL + " (evaluate_condition)",
    "TestEvaluateSubscript::*": INTERNAL + " (evaluate_subscript)",
    "TestPrintContainer::*": INTERNAL + " (PrintContainer)",
    "TestTimeout::test_timeout_decorator_*": INTERNAL + " (its timeout decorator)",
    "test_get_safe_module_handle_lazy_imports": INTERNAL + " (get_safe_module)",
    "test_fix_final_answer_code[*": INTERNAL + " (fix_final_answer_code)",
    "test_check_import_authorized[*": INTERNAL + " (check_import_authorized)",
}

#: tests that import a library the suite does not install: they run where it is installed
NEEDS: dict[str, str] = {
    "TestEvaluatePythonCode::test_can_import_scipy_if_explicitly_authorized": "scipy",
    "TestEvaluatePythonCode::test_can_import_sklearn_if_explicitly_authorized": "sklearn",
}


def _lookup(table: dict[str, str], name: str) -> str | None:
    for key, value in table.items():
        if name == key or (key.endswith("*") and name.startswith(key[:-1])):
            return value
    return None


def mark(item: pytest.Item) -> None:
    """Mark one of the suite's tests as this module lists it."""
    name = item.nodeid.split("test_local_python_executor.py::", 1)[-1]
    needed = NEEDS.get(name)
    if needed is not None and importlib.util.find_spec(needed) is None:
        item.add_marker(pytest.mark.skip(reason=f"needs {needed}, which is not installed here"))
        return
    skip = _lookup(SKIP, name)
    if skip is not None:
        item.add_marker(pytest.mark.skip(reason=skip))
        return
    xfail = _lookup(XFAIL, name)
    if xfail is not None:
        item.add_marker(pytest.mark.xfail(strict=True, reason=xfail, raises=_exceptions(FAILS_WITH[xfail])))


def _exceptions(names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    """The exception classes named; smolagents' are imported only here, where its tests run."""
    from smolagents.local_python_executor import InterpreterError

    known: dict[str, type[BaseException]] = {
        "AssertionError": AssertionError,
        "AttributeError": AttributeError,
        "KeyError": KeyError,
        "ValueError": ValueError,
        "Failed": pytest.fail.Exception,
        "InterpreterError": InterpreterError,
    }
    return tuple(known[name] for name in names)
