// org.freedesktop.DBus.Introspectable: the XML that `gdbus introspect` and `busctl introspect` read.

extension DBusConnection {
    func introspectionXML(for path: ObjectPath) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        let object = exportedObjects[path]
        if object != nil || objectManagers.contains(path) {
            xml += Self.standardInterfacesXML
            if objectManagers.contains(path) { xml += Self.objectManagerXML }
        }
        if let object {
            for name in object.interfaceNames {
                guard let interface = object.interfaces[name]?.declaration else { continue }
                xml += Self.xml(for: interface)
            }
        }
        for child in childNames(of: path) {
            xml += "  <node name=\"\(child)\"/>\n"
        }
        xml += "</node>\n"
        return xml
    }

    /// The names of the next path elements below `path` that lead to exported objects, sorted.
    private func childNames(of path: ObjectPath) -> [String] {
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var names = Set<String>()
        for exported in exportedObjects.keys where exported.isDescendant(of: path) {
            let rest = exported.rawValue.dropFirst(prefix.count)
            if let element = rest.split(separator: "/").first { names.insert(String(element)) }
        }
        return names.sorted()
    }

    private static func xml(for interface: DBusInterface) -> String {
        var xml = "  <interface name=\"\(interface.name)\">\n"
        for method in interface.methods {
            xml += "    <method name=\"\(method.name)\">\n"
            xml += arguments(method.inSignature, names: method.inNames, direction: "in")
            xml += arguments(method.outSignature, names: method.outNames, direction: "out")
            xml += "    </method>\n"
        }
        for signal in interface.signals {
            xml += "    <signal name=\"\(signal.name)\">\n"
            xml += arguments(signal.signature, names: signal.names, direction: nil)
            xml += "    </signal>\n"
        }
        for property in interface.properties {
            xml += "    <property name=\"\(property.name)\" type=\"\(escaped(property.signature.rawValue))\""
            xml += " access=\"\(property.access.rawValue)\"/>\n"
        }
        xml += "  </interface>\n"
        return xml
    }

    private static func arguments(_ signature: DBusSignature?, names: [String], direction: String?) -> String {
        guard let signature else { return "" }
        var xml = ""
        for (index, type) in signature.completeTypes.enumerated() {
            xml += "      <arg"
            if index < names.count { xml += " name=\"\(escaped(names[index]))\"" }
            xml += " type=\"\(escaped(type.rawValue))\""
            if let direction { xml += " direction=\"\(direction)\"" }
            xml += "/>\n"
        }
        return xml
    }

    /// Signatures may contain `{` `}` only, but argument names are free text: escape what XML needs.
    private static func escaped(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }

    private static let standardInterfacesXML = """
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect">
              <arg name="xml_data" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId">
              <arg name="machine_uuid" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="properties" type="a{sv}" direction="out"/>
            </method>
            <method name="Set">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
            <signal name="PropertiesChanged">
              <arg name="interface_name" type="s"/>
              <arg name="changed_properties" type="a{sv}"/>
              <arg name="invalidated_properties" type="as"/>
            </signal>
          </interface>

        """

    private static let objectManagerXML = """
          <interface name="org.freedesktop.DBus.ObjectManager">
            <method name="GetManagedObjects">
              <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
            </method>
            <signal name="InterfacesAdded">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="a{sa{sv}}"/>
            </signal>
            <signal name="InterfacesRemoved">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="as"/>
            </signal>
          </interface>

        """
}
