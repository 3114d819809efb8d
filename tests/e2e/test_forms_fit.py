"""Forms fit the screen they are on: on a phone a draft's line shows every field without a
sideways swipe, boxes wide enough for what goes in them; on a desktop the filter labels keep
their words whole; every select looks like the studio's other fields and is as wide as its
choices."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import NORTHWIND, Studio, sign_in

pytestmark = pytest.mark.e2e
PHONE = {"width": 390, "height": 844}


def box(page: Page, selector: str) -> dict[str, float]:
    return page.locator(selector).first.evaluate("el => el.getBoundingClientRect().toJSON()")


def test_a_draft_line_fits_a_phone_without_a_sideways_swipe(page: Page, studio: Studio) -> None:
    page.set_viewport_size(PHONE)
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices/new")
    card = box(page, "#draft-form")
    table = page.locator("#draft-form table.lines")
    assert table.evaluate("t => t.scrollWidth <= t.clientWidth + 1"), "the lines scroll sideways"
    for field in ("input[name=description]", "input[name=quantity]", "input[name=unit_price]",
                  "input[name=discount_percent]", "input[name=tax_rate]", "button.remove"):
        shown = box(page, f"#lines tr.line {field}")
        assert shown["left"] >= card["left"] - 1 and shown["right"] <= card["right"] + 1, field
        assert shown["right"] <= PHONE["width"], field
    assert box(page, "#lines input[name=unit_price]")["width"] >= 80
    assert box(page, "#lines input[name=tax_rate]")["width"] >= 56
    # With the column heads out of sight, each box still says what it is for.
    said = page.locator("#lines tr.line td").evaluate_all(
        "cells => cells.map(cell => getComputedStyle(cell, '::before').content)")
    for name in ('"Quantity"', '"Unit price"', '"Discount %"', '"Tax %"'):
        assert name in said, said


def test_the_filter_labels_keep_their_words_whole_on_a_desktop(
        page: Page, studio: Studio) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices")
    broken = page.locator("#filters label").evaluate_all("""labels => labels.flatMap(label =>
        Array.from(label.childNodes).filter(node => node.nodeType === 3 && node.textContent.trim())
            .map(node => { const range = document.createRange(); range.selectNodeContents(node);
                           return [node.textContent.trim(), range.getClientRects().length]; })
            .filter(([, lines]) => lines > 1))""")
    assert broken == [], broken


def test_selects_look_like_the_other_fields_and_fit_their_choices(
        page: Page, studio: Studio) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/invoices/{studio.invoice_id(NORTHWIND)}")
    page.locator("#payment-method").scroll_into_view_if_needed()
    field = page.locator("input[name=amount]").first
    for select in ("#payment-method",):
        look = page.locator(select).evaluate(
            "el => [getComputedStyle(el).borderRadius, getComputedStyle(el).borderTopColor]")
        assert look == field.evaluate(
            "el => [getComputedStyle(el).borderRadius, getComputedStyle(el).borderTopColor]")
        width = box(page, select)["width"]
        assert width <= 320, f"{select} is {width}px wide"
    page.goto(studio.url + "/customers")
    country = page.locator("select[name=country]").first
    assert country.evaluate("el => getComputedStyle(el).borderRadius") == "6px"
    assert country.evaluate("el => el.getBoundingClientRect().width") <= 400


def test_text_boxes_look_like_the_other_fields(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/invoices/{studio.invoice_id(NORTHWIND)}")
    page.locator("#share-create").click()
    expect(page.locator("#share-url")).to_be_visible()  # the new link's box, swapped in
    looks = page.locator("input[type=text]").evaluate_all(
        "boxes => boxes.map(el => getComputedStyle(el).borderRadius)")
    assert looks and set(looks) == {"6px"}, looks
