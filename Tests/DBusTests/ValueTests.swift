import Testing
@testable import DBus

extension DBusTests {
    @Suite struct Values {
        @Test func signaturesAreComputedForEveryType() {
            let value = DBusValue.structure([
                .byte(1), .boolean(true), .int16(-2), .uint16(3), .int32(-4), .uint32(5), .int64(-6), .uint64(7),
                .double(0.5), .string("s"), .objectPath("/a"), .signature("a{sv}"), .bytes([1]),
                .array(element: "(is)", []), .dictionary(key: "s", value: "v", []), .variant(.variant(.byte(0))),
            ])
            #expect(value.signature == "(ybnqiuxtdsogaya(is)a{sv}v)")
            #expect([DBusValue.string("a"), .uint32(1)].signature == "su")
        }

        /// A number, string or path is stored in the value itself, not in a heap box (BlueZ's tree of 10,000
        /// devices took 3 million allocations when every case was boxed).
        @Test func scalarsAndStringsAreStoredInline() {
            #expect(MemoryLayout<DBusValue>.size <= MemoryLayout<String>.size + 1)
            #expect(MemoryLayout<DBusValue>.stride <= 24)
        }

        @Test func typedAccessorsReturnNilForOtherTypes() {
            #expect(DBusValue.uint32(7).uint32 == 7)
            #expect(DBusValue.uint32(7).string == nil)
            #expect(DBusValue.array(element: "y", [.byte(1), .byte(2)]).bytes == [1, 2])
            #expect(DBusValue.variant(.variant(.string("x"))).unwrappingVariants == .string("x"))
        }

        @Test func decodingAWrongTypeNamesExpectedAndFoundSignatures() throws {
            let error = #expect(throws: DBusError.self) { try DBusValue.string("x").decode(UInt32.self) }
            #expect(error?.code == .typeMismatch)
            #expect(error?.message.contains("expected signature 'u'") == true)
            #expect(error?.message.contains("found 's'") == true)

            let arguments: [DBusValue] = [.string("a"), .uint32(1)]
            let packError = #expect(throws: DBusError.self) { try arguments.decode(String.self, String.self) }
            #expect(packError?.message.contains("'ss'") == true)
            #expect(packError?.message.contains("'su'") == true)
            let expectError = #expect(throws: DBusError.self) { try arguments.expect("a{oa{sa{sv}}}") }
            #expect(expectError?.code == .typeMismatch)
            #expect(expectError?.message.contains("a{oa{sa{sv}}}") == true)
        }

        @Test func nestedContainersDecodeIntoSwiftTypes() throws {
            let value = DBusValue.dictionary(
                key: "o", value: "a{sa{sv}}",
                [
                    .init(
                        key: .objectPath("/x"),
                        value: .dictionary(
                            key: "s", value: "a{sv}",
                            [
                                .init(
                                    key: .string("I"),
                                    value: .dictionary(
                                        key: "s", value: "v",
                                        [
                                            .init(key: .string("P"), value: .variant(.bytes([9])))
                                        ]))
                            ]))
                ])
            let decoded = try value.decode([ObjectPath: [String: [String: DBusValue]]].self)
            #expect(decoded["/x"]?["I"]?["P"] == .bytes([9]))
            #expect(try DBusValue.bytes([1, 2]).decode([UInt8].self) == [1, 2])
            #expect(throws: DBusError.self) { try DBusValue.array(element: "s", []).decode([UInt32].self) }
        }

        @Test func invalidPathsAndSignaturesThrowInsteadOfAborting() throws {
            // Strings from outside (not literals, which are checked at the call site) go through the throwing init.
            for bad in ["no/leading/slash", "/trailing/", "/with\0nul", "/double//slash", "/bad-char", ""] {
                #expect(throws: DBusError.self) { try ObjectPath(bad) }
            }
            for bad in ["a{vs}", "(", "a", "h\0", "z"] {
                #expect(throws: DBusError.self) { try DBusSignature(bad) }
            }
            #expect(ObjectPath(rawValue: "/org/bluez/hci0") != nil)
            let signature = "sa{sv}as(ii)"
            #expect(try DBusSignature(signature).completeTypes == ["s", "a{sv}", "as", "(ii)"])
        }

        @Test func pathsKnowTheirAncestry() throws {
            let path: ObjectPath = "/org/bluez/hci0"
            #expect(path.parent == "/org/bluez")
            #expect(ObjectPath.root.parent == nil)
            #expect(path.isDescendant(of: "/org"))
            #expect(path.isDescendant(of: .root))
            #expect(!path.isDescendant(of: "/org/blue"))
            #expect(try path.appending("dev_1") == "/org/bluez/hci0/dev_1")
        }

        @Test func matchRulesQuoteTheirValues() {
            let rule = MatchRule(sender: "org.bluez", path: "/a", interface: "i.f", member: "M", arg0: "it's")
            #expect(
                rule.description
                    == "type='signal',sender='org.bluez',path='/a',interface='i.f',member='M',arg0='it'\\''s'")
        }

        /// Catches: a timeout rounded down (a call failing before its time), one that overflows into a deadline
        /// in the past, and a negative one that never times out.
        @Test func callTimeoutsBecomeNanosecondsRoundedUp() {
            func nanoseconds(_ timeout: Duration) -> Int64? { ReplyBox.nanoseconds(timeout) }
            #expect(nanoseconds(.seconds(25)) == 25_000_000_000)
            #expect(nanoseconds(.microseconds(1500)) == 1_500_000)
            #expect(nanoseconds(Duration(secondsComponent: 0, attosecondsComponent: 1)) == 1)
            #expect(nanoseconds(.zero) == 0)
            #expect(nanoseconds(.seconds(-1)) == 0)
            #expect(nanoseconds(.seconds(Int64.max)) == nil)
            #expect(nanoseconds(.seconds(Int64.max / 1_000_000_000)) != nil)
        }
    }
}
